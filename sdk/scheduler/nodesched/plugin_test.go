package nodesched

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

var pluginCases = []struct {
	name string
	id   Identity
	opts Options
}{
	{"system", Identity{Name: "scheduler-system", Version: "0.1.0", JobType: "system", MaxAttempts: 5},
		Options{PreemptionEnabled: SystemPreemption}},
	{"sysbatch", Identity{Name: "scheduler-sysbatch", Version: "0.2.0", JobType: "sysbatch", MaxAttempts: 2},
		Options{Sysbatch: true, PreemptionEnabled: SysbatchPreemption}},
}

func TestPluginInfo(t *testing.T) {
	for _, tc := range pluginCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewPlugin(tc.id, tc.opts).Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := &schedulerpb.InfoResponse{
				Name:     tc.id.Name,
				Version:  tc.id.Version,
				JobTypes: []*schedulerpb.JobTypeInfo{{Name: tc.id.JobType, MaxAttempts: tc.id.MaxAttempts, PerNode: true}},
			}
			if !proto.Equal(got, want) {
				t.Errorf("Info = %v, want %v", got, want)
			}
		})
	}
}

// TestPluginSchedule checks that the plugin answers as its engine does and
// refuses a canceled context. TestPluginConformance holds it to the
// contract every scheduler keeps.
func TestPluginSchedule(t *testing.T) {
	for _, tc := range pluginCases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlugin(tc.id, tc.opts)
			got, err := p.Schedule(t.Context(), conformance.NewBuilder(tc.id.JobType).Nodes(3).Request())
			if err != nil {
				t.Fatal(err)
			}
			want, err := New(tc.opts).Schedule(conformance.NewBuilder(tc.id.JobType).Nodes(3).Request())
			if err != nil {
				t.Fatal(err)
			}
			if len(got.GetPlan().GetNodeAllocation()) == 0 || !proto.Equal(got, want) {
				t.Errorf("Schedule = %v, want the engine's %v with placements", got, want)
			}

			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if _, err := p.Schedule(ctx, conformance.NewBuilder(tc.id.JobType).Nodes(3).Request()); !errors.Is(err, context.Canceled) {
				t.Errorf("Schedule with a canceled context: err = %v, want context.Canceled", err)
			}
		})
	}
}

// TestPluginConformance runs the conformance kit over gRPC, with groups of
// count 2 (no max_group_count is declared here), so each node runs two
// allocations of each group.
func TestPluginConformance(t *testing.T) {
	for _, tc := range pluginCases {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, NewPlugin(tc.id, tc.opts), conformance.Options{})
		})
	}
}

package conformance_test

import (
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

type knobs struct {
	Spread int `hcl:"spread,optional"`
}

// configured is a scheduler that takes a config block.
type configured struct {
	scheduler.Scheduler
	cfg base.Settable
}

func (c configured) PluginConfig() base.Settable { return c.cfg }

// lax takes any config it is given, unknown fields too.
type lax struct{ base.Settable }

func (lax) SetJSON([]byte, string) ([]*basepb.FieldError, error) { return nil, nil }

func TestRunConfig(t *testing.T) {
	good := func() base.Settable { return base.MustConfig(knobs{Spread: 2}, nil) }
	cases := []struct {
		name  string
		sched scheduler.Scheduler
		want  []string
	}{
		{"no config", systemSched(), nil},
		{"config", configured{systemSched(), good()}, nil},
		{"lax config", configured{systemSched(), lax{good()}}, []string{"unknown field"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			defer rec.close()
			conformance.RunConfig(rec, tc.sched)
			if len(rec.errs) != len(tc.want) {
				t.Fatalf("RunConfig reported %q, want %d", rec.errs, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(rec.errs[i], w) {
					t.Errorf("failure %q, want %q", rec.errs[i], w)
				}
			}
		})
	}
}

package oneshot

import (
	"fmt"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// The plugin keeps every rule the core relies on for a scheduler plugin,
// over gRPC, plus the one rule of its own type: a completed allocation is
// never placed again, not even for a new version of the job.
func TestConformance(t *testing.T) {
	conformance.Run(t, New("test"), conformance.Options{
		Scenarios: []conformance.Scenario{{
			Name: "completed-stays-done",
			Request: func(tg conformance.Target) *schedulerpb.ScheduleRequest {
				return tg.Cluster().
					Alloc("web", "node-1", 0, conformance.ClientStatus("complete")).
					Alloc("web", "node-2", 1, conformance.ClientStatus("complete")).
					NewVersion(conformance.DestructiveChange).
					Request()
			},
			Expect: func(_ conformance.Target, _ *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
				var out []string
				for _, pa := range resp.GetPlan().GetNodeAllocation() {
					if pa.GetTaskGroup() == "web" {
						out = append(out, fmt.Sprintf("%s was placed again; a completed oneshot allocation is done for good", pa.GetName()))
					}
				}
				return out
			},
		}},
	})
}

// The plugin's config round trip holds as the agent makes it: the schema
// decodes, its defaults are accepted, a wrong type or an unknown field is
// refused with the field named.
func TestConfigConformance(t *testing.T) {
	conformance.RunConfig(t, New("test"))
}

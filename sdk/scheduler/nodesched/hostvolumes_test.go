package nodesched

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// TestHostVolumeFilter: a system group with a read-write host volume goes
// only to the nodes that have it writable; the others are filtered with
// Nomad's "missing compatible host volumes".
func TestHostVolumeFilter(t *testing.T) {
	withVolume := func(j *schedulerpb.Job) {
		j.TaskGroups[0].Volumes = []*schedulerpb.VolumeRequest{{Name: "data", Type: "host", Source: "shared"}}
	}
	vol := func(readOnly bool) func(*schedulerpb.Node) {
		return func(n *schedulerpb.Node) {
			n.HostVolumes = map[string]*schedulerpb.HostVolume{"shared": {ReadOnly: readOnly}}
		}
	}
	for name, engine := range map[string]*Engine{"system": systemEngine(), "sysbatch": sysbatchEngine()} {
		t.Run(name, func(t *testing.T) {
			req := tReq(tJob(name, withVolume), []*schedulerpb.Node{
				tNode("n1", vol(false)), tNode("n2", vol(true)), tNode("n3"),
			})
			out, err := engine.Run(req)
			if err != nil {
				t.Fatal(err)
			}
			allocs := out.Response.GetPlan().GetNodeAllocation()
			if len(allocs) != 1 || allocs[0].GetNodeId() != "n1" {
				t.Fatalf("placed %v, want one alloc on n1", allocs)
			}
			if got := out.Filtered["g"].GetConstraintFiltered(); len(got) != 1 || got[feasible.ReasonHostVolumes] != 2 {
				t.Fatalf("filtered = %v, want 2 nodes for %q", got, feasible.ReasonHostVolumes)
			}
		})
	}
}

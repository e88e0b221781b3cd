package nodesched

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// An alloc of a system job marked for migration (a user's alloc stop) on a
// ready node is stopped as being migrated and replaced on that node,
// chained to it; on a draining node it is stopped as tainted and not
// replaced there.
func TestSystemMigrateOnReadyNodeIsReplaced(t *testing.T) {
	marked := func(a *schedulerpb.Allocation) { a.Migrate = true }
	draining := func(n *schedulerpb.Node) { n.Draining = true }
	runCases(t, []engineCase{
		{name: "ready node: replaced in place", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob("system"), []*schedulerpb.Node{tNode("n1")}, tAlloc("a1", "n1", marked))
			},
			placed: []string{"n1/j.g[0]<-a1"}, stopped: []string{"a1:" + DescMigrating}},
		{name: "draining node: stopped, not replaced there", engine: systemEngine(),
			req: func() *schedulerpb.ScheduleRequest {
				return tReq(tJob("system"), []*schedulerpb.Node{tNode("n1", draining)}, tAlloc("a1", "n1", marked))
			},
			stopped: []string{"a1:" + DescTainted}},
	})
}

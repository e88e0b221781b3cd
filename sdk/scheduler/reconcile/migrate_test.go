package reconcile

import (
	"slices"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// A system alloc marked for migration on a ready, untainted node is both
// migrated (stopped) and placed again on that node with itself as the
// previous alloc; on a tainted node, or for sysbatch, it is only migrated.
func TestMigrateOnReadyNodePlacesReplacement(t *testing.T) {
	for _, c := range []struct {
		node     string
		sysbatch bool
		want     []string
	}{
		{"ready", false, []string{"migrate", "place"}},
		{"ready", true, []string{"migrate"}},
		{"draining", false, []string{"migrate"}},
		{"down", false, []string{"migrate"}},
	} {
		a := liveAlloc()
		a.Migrate = true
		ready, notReady, tainted := nodeInput(c.node, []*schedulerpb.Allocation{a})
		res := Nodes(&Input{Job: testJob(), Sysbatch: c.sysbatch, Ready: ready, NotReady: notReady, Tainted: tainted,
			Live: []*schedulerpb.Allocation{a}, Terminal: TerminalIndex{}})
		if got := bucketOf(res, a.GetName()); !slices.Equal(got, c.want) {
			t.Errorf("%s node, sysbatch %t: buckets %v, want %v", c.node, c.sysbatch, got, c.want)
		}
		for _, p := range res.Place {
			if p.Alloc.GetId() != a.GetId() {
				t.Errorf("replacement chained to %q, want %q", p.Alloc.GetId(), a.GetId())
			}
		}
	}
}

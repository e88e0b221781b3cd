package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

// Allocations that had finished before the drain (one still carrying the
// migrate mark of an earlier drain) are not reported as migrating; only the
// running one the drainer marks is, and its stop.
func TestNodeDrainMonitorSkipsFinishedAllocs(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/nodes", []*structs.NodeListStub{clitest.TestNode().Stub()})
	f.JSON("POST /v1/node/"+clitest.NodeID+"/drain", structs.NodeEligibilityUpdateResponse{Index: 9})
	migrate := true
	finished := func(id, status string, marked bool) *structs.Allocation {
		a := clitest.TestAlloc("t")
		a.ID, a.ClientStatus = id, status
		if marked {
			a.DesiredTransition.Migrate = &migrate
			a.DesiredStatus = structs.AllocDesiredStatusStop
		}
		return a
	}
	var step atomic.Int32
	f.Handle("GET /v1/node/"+clitest.NodeID+"/allocations", func(w http.ResponseWriter, r *http.Request) {
		done := finished("11111111-0000-0000-0000-000000000000", "complete", false)
		old := finished("22222222-0000-0000-0000-000000000000", "complete", true)
		failed := finished("33333333-0000-0000-0000-000000000000", "failed", true)
		live := clitest.TestAlloc("t")
		// raced finishes by itself; the drainer's mark lands after.
		raced := finished("44444444-0000-0000-0000-000000000000", "running", false)
		switch step.Add(1) {
		case 1:
		case 2:
			live.DesiredTransition.Migrate = &migrate
			raced.ClientStatus = "complete"
		default:
			live.DesiredTransition.Migrate = &migrate
			live.ClientStatus = "complete"
			raced = finished(raced.ID, "complete", true)
		}
		_ = json.NewEncoder(w).Encode([]*structs.Allocation{done, old, failed, live, raced})
	})
	f.Handle("GET /v1/node/"+clitest.NodeID, func(w http.ResponseWriter, r *http.Request) {
		n := clitest.TestNode()
		if step.Load() < 3 {
			n.DrainStrategy = &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}
		}
		_ = json.NewEncoder(w).Encode(n)
	})
	r := f.Run(t, "", "node", "drain", "-enable", "-yes", clitest.NodeID)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		`    Alloc "8ba85cef" marked for migration`,
		`    Alloc "8ba85cef" status running -> complete`,
		`    All allocations on node "`+clitest.NodeID+`" have stopped`,
		`==> Drain complete for node "`+clitest.NodeID+`"`,
	)
	for _, id := range []string{"11111111", "22222222", "33333333"} { // finished before the drain
		if strings.Contains(r.Out, id) {
			t.Errorf("the finished alloc %s is reported:\n%s", id, r.Out)
		}
	}
	clitest.WantContains(t, "stdout", r.Out, `    Alloc "44444444" status running -> complete`)
	if strings.Contains(r.Out, `"44444444" marked`) {
		t.Errorf("the alloc that finished by itself is reported as migrating:\n%s", r.Out)
	}
	if n := strings.Count(r.Out, "marked for migration"); n != 1 {
		t.Errorf("%d allocs reported as migrating, want 1:\n%s", n, r.Out)
	}
}

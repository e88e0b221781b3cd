package command

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestEvalStatus(t *testing.T) {
	f := newFakeAgent(t)
	eval := &structs.Evaluation{ID: evalID, Namespace: "default", Priority: 50, Type: "sysbatch", TriggeredBy: "job-register",
		JobID: "sb", Status: "complete", CreateTime: ns(testNow.Add(-3 * time.Minute)), ModifyTime: ns(testNow.Add(-3 * time.Minute)),
		QueuedAllocations: map[string]int{"g": 0},
		FailedTGAllocs: map[string]*structs.AllocMetric{"g": {NodesEvaluated: 2, NodesFiltered: 2,
			ConstraintFiltered: map[string]int{"${attr.kernel.name} = plan9": 2}}}}
	f.json("GET /v1/evaluations", []*structs.Evaluation{eval})
	f.json("GET /v1/evaluation/"+evalID, eval)
	r := f.run(t, "", "eval", "status", "4f6c")
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.out,
		"ID                 = 4f6c9e5e",
		"Create Time        = 3m ago",
		"TriggeredBy        = job-register",
		"Placement Failures = true",
		"Failed Placements\nTask Group \"g\" (failed to place 1 allocation):\n  * Constraint \"${attr.kernel.name} = plan9\": 2 nodes excluded by filter",
	)
	if q := f.request("GET /v1/evaluations").Query; q != "namespace=%2A&prefix=4f6c" {
		t.Errorf("prefix query %q", q)
	}
	r = f.run(t, "", "eval", "status", "4")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.errOut, "at least two characters")
}

func TestEvalList(t *testing.T) {
	f := newFakeAgent(t)
	f.json("GET /v1/evaluations", []*structs.Evaluation{
		{ID: "11111111-x", Priority: 50, TriggeredBy: "job-register", JobID: "a", Namespace: "default", Status: "complete", CreateIndex: 1},
		{ID: "22222222-x", Priority: 50, TriggeredBy: "queued-allocs", JobID: "a", Namespace: "default", NodeID: "nnnnnnnn-1", Status: "blocked", CreateIndex: 2},
	})
	r := f.run(t, "", "eval", "list")
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.out,
		"ID        Priority  Triggered By   Job ID  Namespace  Node ID   Status    Placement Failures\n"+
			"22222222  50        queued-allocs  a       default    nnnnnnnn  blocked   false\n"+
			"11111111  50        job-register   a       default    <none>    complete  false")
	r = f.run(t, "", "eval", "list", "-status", "blocked", "-json")
	wantCode(t, r, 0)
	if strings.Contains(r.out, "11111111") || !strings.Contains(r.out, `"Status": "blocked"`) {
		t.Errorf("filtered JSON:\n%s", r.out)
	}
}

package alloc

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestEvalStatus(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	eval := &structs.Evaluation{ID: clitest.EvalID, Namespace: "default", Priority: 50, Type: "sysbatch", TriggeredBy: "job-register",
		JobID: "sb", Status: "complete", CreateTime: clitest.Ns(clitest.TestNow.Add(-3 * time.Minute)), ModifyTime: clitest.Ns(clitest.TestNow.Add(-3 * time.Minute)),
		QueuedAllocations: map[string]int{"g": 0},
		FailedTGAllocs: map[string]*structs.AllocMetric{"g": {NodesEvaluated: 2, NodesFiltered: 2,
			ConstraintFiltered: map[string]int{"${attr.kernel.name} = plan9": 2}}}}
	f.JSON("GET /v1/evaluations", []*structs.Evaluation{eval})
	f.JSON("GET /v1/evaluation/"+clitest.EvalID, eval)
	r := f.Run(t, "", "eval", "status", "4f6c")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		"ID                 = 4f6c9e5e",
		"Create Time        = 3m ago",
		"TriggeredBy        = job-register",
		"Placement Failures = true",
		"Failed Placements\nTask Group \"g\" (failed to place 1 allocation):\n  * Constraint \"${attr.kernel.name} = plan9\": 2 nodes excluded by filter",
	)
	if q := f.Request("GET /v1/evaluations").Query; q != "namespace=%2A&prefix=4f6c" {
		t.Errorf("prefix query %q", q)
	}
	r = f.Run(t, "", "eval", "status", "4")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "at least two characters")
}

func TestEvalList(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/evaluations", []*structs.Evaluation{
		{ID: "11111111-x", Priority: 50, TriggeredBy: "job-register", JobID: "a", Namespace: "default", Status: "complete", CreateIndex: 1},
		{ID: "22222222-x", Priority: 50, TriggeredBy: "queued-allocs", JobID: "a", Namespace: "default", NodeID: "nnnnnnnn-1", Status: "blocked", CreateIndex: 2},
	})
	r := f.Run(t, "", "eval", "list")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		"ID        Priority  Triggered By   Job ID  Namespace  Node ID   Status    Placement Failures\n"+
			"22222222  50        queued-allocs  a       default    nnnnnnnn  blocked   false\n"+
			"11111111  50        job-register   a       default    <none>    complete  false")
	r = f.Run(t, "", "eval", "list", "-status", "blocked", "-json")
	clitest.WantCode(t, r, 0)
	if strings.Contains(r.Out, "11111111") || !strings.Contains(r.Out, `"Status": "blocked"`) {
		t.Errorf("filtered JSON:\n%s", r.Out)
	}
}

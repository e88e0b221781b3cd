package state

import (
	"slices"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// A node event reads only the jobs whose type evaluates them on node
// changes, by declared behaviour; a job that changes type moves in or out.
func TestJobsEvaluatedOnNodeChange(t *testing.T) {
	s := testStore(t)
	update := declaredJob("everywhere", &structs.JobTypeBehavior{EvalOnNodeUpdate: true})
	join := declaredJob("newcomers", &structs.JobTypeBehavior{EvalOnNodeJoin: true})
	plain := declaredJob("placed", &structs.JobTypeBehavior{RunsToCompletion: true})
	none := declaredJob("undeclared", nil)
	for i, j := range []*structs.Job{update, join, plain, none} {
		must(t, s.UpsertJob(uint64(10+i), j))
	}
	ids := func() []string {
		js, err := s.JobsEvaluatedOnNodeChange(nil)
		must(t, err)
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		slices.Sort(out)
		return out
	}
	want := []string{update.ID, join.ID}
	slices.Sort(want)
	if got := ids(); !slices.Equal(got, want) {
		t.Fatalf("jobs = %v, want %v", got, want)
	}
	moved := plain.Copy()
	moved.TypeBehavior = &structs.JobTypeBehavior{EvalOnNodeUpdate: true}
	must(t, s.UpsertJob(20, moved))
	left := update.Copy()
	left.TypeBehavior = &structs.JobTypeBehavior{}
	must(t, s.UpsertJob(21, left))
	want = []string{join.ID, plain.ID}
	slices.Sort(want)
	if got := ids(); !slices.Equal(got, want) {
		t.Fatalf("after the type changes: %v, want %v", got, want)
	}
}

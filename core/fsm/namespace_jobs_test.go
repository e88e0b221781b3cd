package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// A job register into a namespace that does not exist is refused at apply,
// whatever the endpoint checked: nothing is written, no hook fires, and the
// same entry applies once the namespace exists. A namespace deleted between
// the endpoint's check and the apply is the race this closes.
func TestFSM_JobRegisterRefusesMissingNamespace(t *testing.T) {
	f, rec := testFSM(t)
	job := mockJob("service")
	job.Namespace = "team-a"
	ev := &structs.Evaluation{ID: uuid.NewString(), Namespace: "team-a", JobID: job.ID, Type: "service",
		TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusPending}
	orphanEval := &structs.Evaluation{ID: uuid.NewString(), Namespace: "gone", JobID: "x", Type: "service",
		TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusPending}

	cases := []struct {
		name string
		req  *structs.JobRegisterRequest
		want string
	}{
		{"job and eval", &structs.JobRegisterRequest{Job: job, Eval: ev, Namespace: "team-a", JobID: job.ID, RequireNamespace: true}, `job "` + job.ID + `": namespace "team-a" does not exist`},
		{"job only", &structs.JobRegisterRequest{Job: job, RequireNamespace: true}, `namespace "team-a" does not exist`},
		{"eval only", &structs.JobRegisterRequest{Eval: orphanEval, RequireNamespace: true}, `job "x": namespace "gone" does not exist`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.State().LatestIndex()
			resp := apply(t, f, uint64(i+1), structs.JobRegisterRequestType, tc.req)
			err, _ := resp.(error)
			if err == nil || !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("response %v, want ErrInvalid containing %q", resp, tc.want)
			}
			if f.Failed() != nil {
				t.Fatalf("FSM stopped: %v", f.Failed())
			}
			if after := f.State().LatestIndex(); after != before {
				t.Errorf("state index moved %d -> %d on a refused entry", before, after)
			}
			jobs, err := f.State().Jobs(nil)
			must(t, err)
			evals, err := f.State().Evals(nil)
			must(t, err)
			if len(jobs) != 0 || len(evals) != 0 {
				t.Fatalf("refused entry wrote %d jobs, %d evals", len(jobs), len(evals))
			}
		})
	}
	rec.mu.Lock()
	if len(rec.upserted) != 0 || len(rec.evals) != 0 {
		t.Errorf("hooks ran for refused entries: %d jobs, %d evals", len(rec.upserted), len(rec.evals))
	}
	rec.mu.Unlock()

	mustApply(t, f, 10, structs.NamespaceUpsertRequestType, &structs.NamespaceUpsertRequest{Namespaces: []*structs.Namespace{{Name: "team-a"}}})
	mustApply(t, f, 11, structs.JobRegisterRequestType, cases[0].req)
	got, err := f.State().JobByID(nil, "team-a", job.ID)
	must(t, err)
	if got == nil {
		t.Fatal("job not written once its namespace exists")
	}
	// The default namespace exists without a row, and an empty namespace
	// is the default one.
	def := mockJob("service")
	mustApply(t, f, 12, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: def, RequireNamespace: true})
	if got, _ := f.State().JobByID(nil, structs.DefaultNamespace, def.ID); got == nil {
		t.Fatal("job in the default namespace not written")
	}

	// An entry proposed before namespaces were checked (no
	// RequireNamespace) replays as it applied then.
	old := mockJob("service")
	old.Namespace = "never-created"
	mustApply(t, f, 13, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: old})
	if got, _ := f.State().JobByID(nil, "never-created", old.ID); got == nil {
		t.Fatal("an older entry into a missing namespace was refused on replay")
	}
}

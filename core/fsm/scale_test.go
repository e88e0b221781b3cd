package fsm

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// A scale entry writes the new version, its eval and the event together;
// a follower restored from a snapshot holds the same events as one that
// applied the log, Meta values included.
func TestApplyJobScale(t *testing.T) {
	f, rec := testFSM(t)
	job := mockJob("batch")
	mustApply(t, f, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Namespace: "default", JobID: job.ID})
	stored, _ := f.State().JobByID(nil, "default", job.ID)

	next := stored.Copy()
	next.TaskGroups[0].Count = 4
	ev := mockEval("default", job.ID, structs.EvalStatusPending)
	ev.TriggeredBy = structs.EvalTriggerJobScaling
	four := int64(4)
	evalID := ev.ID
	mustApply(t, f, 11, structs.JobScaleRequestType, &structs.JobScaleRequest{
		Namespace: "default", JobID: job.ID, Group: "web", JobModifyIndex: stored.JobModifyIndex,
		Job: next, Eval: ev, Now: 1234,
		Event: &structs.ScalingEvent{Count: &four, PreviousCount: 1, Message: "up", EvalID: &evalID,
			Meta: map[string]any{"n": 2.5, "s": "x", "l": []any{1.0, "y"}}},
	})
	cur, _ := f.State().JobByID(nil, "default", job.ID)
	if cur.Version != 1 || cur.TaskGroups[0].Count != 4 || cur.JobModifyIndex != 11 {
		t.Fatalf("job after scale: version %d count %d modify %d", cur.Version, cur.TaskGroups[0].Count, cur.JobModifyIndex)
	}
	if got, _ := f.State().EvalByID(nil, ev.ID); got == nil || got.JobModifyIndex != 11 {
		t.Fatalf("eval %+v, want it written with the new version's index", got)
	}
	row, _ := f.State().ScalingEventsByJob(nil, "default", job.ID)
	if row == nil || len(row.ScalingEvents["web"]) != 1 {
		t.Fatalf("events %+v", row)
	}
	if e := row.ScalingEvents["web"][0]; e.Time != 1234 || e.CreateIndex != 11 || *e.Count != 4 {
		t.Errorf("event %+v, want the entry's time and index", e)
	}
	rec.mu.Lock()
	heard := len(rec.upserted) == 2 && rec.upserted[1].Version == 1 && len(rec.evals) == 1 && rec.evals[0].ID == ev.ID
	rec.mu.Unlock()
	if !heard {
		t.Error("the hooks did not hear of the new version and its eval")
	}

	// A stale entry is refused whole.
	stale := apply(t, f, 12, structs.JobScaleRequestType, &structs.JobScaleRequest{
		Namespace: "default", JobID: job.ID, Group: "web", JobModifyIndex: 10, Job: next, Event: &structs.ScalingEvent{Message: "late"}})
	if err, ok := stale.(error); !ok || !errors.Is(err, structs.ErrConflict) {
		t.Fatalf("stale entry answered %v, want a conflict", stale)
	}
	if f.Failed() != nil {
		t.Fatalf("a refused entry stopped the FSM: %v", f.Failed())
	}

	restored, _ := testFSM(t)
	must(t, restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))))
	want, got := dump(t, f.State()), dump(t, restored.State())
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("restored state differs:\nlog      %v\nrestored %v", want, got)
	}
	a, _ := f.State().ScalingEventsByJob(nil, "default", job.ID)
	b, _ := restored.State().ScalingEventsByJob(nil, "default", job.ID)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("events differ after restore:\n%+v\n%+v", a, b)
	}
}

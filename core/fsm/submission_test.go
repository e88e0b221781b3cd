package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestJobSubmissionLifecycle: a register's source is stored with the
// version it wrote, survives a snapshot, is dropped with the version it
// belongs to, and with the job on purge.
func TestJobSubmissionLifecycle(t *testing.T) {
	f, _ := testFSM(t)
	job := mockJob("batch")
	job.Namespace = structs.DefaultNamespace
	register := func(index uint64, cmd string, sub *structs.JobSubmission) {
		t.Helper()
		j := job.Copy()
		j.TaskGroups[0].Tasks[0].Config = map[string]any{"command": cmd}
		mustApply(t, f, index, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: j, Submission: sub})
	}
	get := func(f *FSM, version uint64) *structs.JobSubmission {
		t.Helper()
		s, err := f.State().JobSubmission(nil, job.Namespace, job.ID, version)
		must(t, err)
		return s
	}
	register(10, "/bin/a", &structs.JobSubmission{Source: "source a", Format: "hcl2", VariableFlags: map[string]string{"k": "v"}})
	register(11, "/bin/b", nil)
	register(12, "/bin/c", &structs.JobSubmission{Source: "source c", Format: "json"})

	if s := get(f, 0); s == nil || s.Source != "source a" || s.VariableFlags["k"] != "v" || s.JobID != job.ID || s.JobModifyIndex != 10 {
		t.Fatalf("version 0: %+v", s)
	}
	if s := get(f, 1); s != nil {
		t.Fatalf("version 1 was registered without a source: %+v", s)
	}
	if s := get(f, 2); s == nil || s.Source != "source c" || s.Version != 2 {
		t.Fatalf("version 2: %+v", s)
	}

	// A snapshot keeps them.
	restored, _ := testFSM(t)
	must(t, restored.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))))
	if s := get(restored, 2); s == nil || s.Source != "source c" {
		t.Fatalf("restored version 2: %+v", s)
	}

	// Versions pruned by later registers lose their sources at the next
	// register that stores one.
	idx := uint64(13)
	for i := 0; i < 10; i++ {
		register(idx, "/bin/loop"+string(rune('a'+i)), &structs.JobSubmission{Source: "loop", Format: "hcl2"})
		idx++
	}
	kept, err := f.State().JobVersionsByID(nil, job.Namespace, job.ID)
	must(t, err)
	oldest := kept[len(kept)-1].Version
	if oldest == 0 {
		t.Fatalf("no version was pruned (%d kept); the test needs more registers", len(kept))
	}
	if s := get(f, 0); s != nil {
		t.Errorf("the source of pruned version 0 is still stored")
	}
	if s := get(f, oldest); s == nil {
		t.Errorf("the source of kept version %d is gone", oldest)
	}

	// A purge drops them all.
	mustApply(t, f, idx, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: job.Namespace, JobID: job.ID, Purge: true})
	it, err := f.State().JobSubmission(nil, job.Namespace, job.ID, kept[0].Version)
	must(t, err)
	if it != nil {
		t.Errorf("purged job still has a source: %+v", it)
	}
}

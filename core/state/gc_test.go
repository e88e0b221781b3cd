package state

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

func ref(ns, id string, idx uint64) structs.GCRef {
	return structs.GCRef{Namespace: ns, ID: id, ModifyIndex: idx}
}

// gcFixture: a stopped batch job with one complete eval and two complete
// allocs of it, on a node.
type gcFixture struct {
	s      *StateStore
	job    *structs.Job
	eval   *structs.Evaluation
	allocs []*structs.Allocation
	node   *structs.Node
}

func newGCFixture(t *testing.T) *gcFixture {
	t.Helper()
	s := testStore(t)
	n := mockNode()
	must(t, s.UpsertNode(5, n))
	job := mockJob("batch")
	job.Stop = true
	job = storedJob(t, s, 10, job)
	e := mockEval(job, structs.EvalStatusComplete)
	must(t, s.UpsertEvals(11, []*structs.Evaluation{e}))
	var allocs []*structs.Allocation
	for i := 0; i < 2; i++ {
		a := mockAlloc(job, n.ID)
		a.EvalID = e.ID
		a.ClientStatus = structs.AllocClientStatusComplete
		allocs = append(allocs, a)
	}
	must(t, s.UpsertAllocs(12, allocs))
	f := &gcFixture{s: s, node: n}
	f.job, _ = s.JobByID(nil, job.Namespace, job.ID)
	f.eval, _ = s.EvalByID(nil, e.ID)
	for _, a := range allocs {
		got, _ := s.AllocByID(nil, a.ID)
		f.allocs = append(f.allocs, got)
	}
	return f
}

func (f *gcFixture) all() *structs.GCReapRequest {
	req := &structs.GCReapRequest{}
	for _, a := range f.allocs {
		req.Allocs = append(req.Allocs, ref(a.Namespace, a.ID, a.ModifyIndex))
	}
	req.Evals = []structs.GCRef{ref(f.eval.Namespace, f.eval.ID, f.eval.ModifyIndex)}
	req.Jobs = []structs.GCRef{ref(f.job.Namespace, f.job.ID, f.job.ModifyIndex)}
	return req
}

func TestGCReapJobWithChildren(t *testing.T) {
	f := newGCFixture(t)
	out, err := f.s.GCReap(20, f.all())
	must(t, err)
	if out.Allocs != 2 || out.Evals != 1 || out.Jobs != 1 || out.Skipped != 0 {
		t.Fatalf("response %+v", out)
	}
	if j, _ := f.s.JobByID(nil, f.job.Namespace, f.job.ID); j != nil {
		t.Error("job kept")
	}
	if s, _ := f.s.JobSummaryByID(nil, f.job.Namespace, f.job.ID); s != nil {
		t.Error("summary kept")
	}
	if e, _ := f.s.EvalByID(nil, f.eval.ID); e != nil {
		t.Error("eval kept")
	}
	if len(out.DeletedJobs) != 1 || out.DeletedJobs[0].ID != f.job.ID {
		t.Errorf("deleted jobs %v", out.DeletedJobs)
	}
	if f.s.LatestIndex() != 20 {
		t.Errorf("latest index %d", f.s.LatestIndex())
	}
}

func TestGCReapSkipsWhatChanged(t *testing.T) {
	t.Run("alloc moved: it, its eval and its job stay", func(t *testing.T) {
		f := newGCFixture(t)
		req := f.all()
		req.Allocs[0].ModifyIndex-- // decided at an older index
		out, err := f.s.GCReap(20, req)
		must(t, err)
		if out.Allocs != 1 || out.Evals != 0 || out.Jobs != 0 || out.Skipped != 3 {
			t.Fatalf("response %+v", out)
		}
		if a, _ := f.s.AllocByID(nil, f.allocs[0].ID); a == nil {
			t.Error("moved alloc reaped")
		}
		if j, _ := f.s.JobByID(nil, f.job.Namespace, f.job.ID); j == nil {
			t.Error("job reaped with a child left")
		}
	})
	t.Run("alloc still running on its client", func(t *testing.T) {
		f := newGCFixture(t)
		must(t, f.s.UpdateAllocsFromClient(15, []*structs.Allocation{clientUpdate(f.allocs[0].ID, structs.AllocClientStatusRunning)}))
		req := f.all()
		a, _ := f.s.AllocByID(nil, f.allocs[0].ID)
		req.Allocs[0].ModifyIndex = a.ModifyIndex
		out, err := f.s.GCReap(20, req)
		must(t, err)
		if out.Allocs != 1 || out.Evals != 0 || out.Jobs != 0 {
			t.Fatalf("response %+v", out)
		}
	})
	t.Run("eval not named: the job stays", func(t *testing.T) {
		f := newGCFixture(t)
		req := f.all()
		req.Evals = nil
		out, err := f.s.GCReap(20, req)
		must(t, err)
		if out.Allocs != 2 || out.Jobs != 0 || out.Skipped != 1 {
			t.Fatalf("response %+v", out)
		}
	})
	t.Run("job registered again", func(t *testing.T) {
		f := newGCFixture(t)
		again := f.job.Copy()
		again.Stop = false
		must(t, f.s.UpsertJob(15, again))
		out, err := f.s.GCReap(20, f.all())
		must(t, err)
		if out.Jobs != 0 || out.Evals != 1 || out.Allocs != 2 {
			t.Fatalf("response %+v", out)
		}
		if j, _ := f.s.JobByID(nil, f.job.Namespace, f.job.ID); j == nil {
			t.Error("re-registered job purged")
		}
	})
	t.Run("children in an earlier entry", func(t *testing.T) {
		f := newGCFixture(t)
		req := f.all()
		first := &structs.GCReapRequest{Allocs: req.Allocs, Evals: req.Evals}
		out, err := f.s.GCReap(20, first)
		must(t, err)
		if out.Reaped() != 3 {
			t.Fatalf("first %+v", out)
		}
		j, _ := f.s.JobByID(nil, f.job.Namespace, f.job.ID)
		out, err = f.s.GCReap(21, &structs.GCReapRequest{Jobs: []structs.GCRef{ref(j.Namespace, j.ID, j.ModifyIndex)}})
		must(t, err)
		if out.Jobs != 1 {
			t.Fatalf("second %+v", out)
		}
	})
	t.Run("missing and duplicate objects", func(t *testing.T) {
		f := newGCFixture(t)
		req := f.all()
		req.Allocs = append(req.Allocs, req.Allocs[0], ref("default", "nope", 1))
		req.Nodes = []structs.GCRef{ref("", "nope", 1)}
		out, err := f.s.GCReap(20, req)
		must(t, err)
		if out.Allocs != 2 || out.Jobs != 1 || out.Skipped != 3 {
			t.Fatalf("response %+v", out)
		}
	})
}

func TestGCReapNodes(t *testing.T) {
	f := newGCFixture(t)
	ready := mockNode()
	must(t, f.s.UpsertNode(13, ready))
	must(t, f.s.UpdateNodeStatus(14, f.node.ID, structs.NodeStatusDown, 1, nil))
	down, _ := f.s.NodeByID(nil, f.node.ID)
	busy := mockNode()
	must(t, f.s.UpsertNode(15, busy))
	live := mockAlloc(f.job, busy.ID)
	live.DesiredStatus, live.ClientStatus = structs.AllocDesiredStatusStop, structs.AllocClientStatusRunning
	must(t, f.s.UpsertAllocs(16, []*structs.Allocation{live}))
	must(t, f.s.UpdateNodeStatus(17, busy.ID, structs.NodeStatusDown, 1, nil))
	busy, _ = f.s.NodeByID(nil, busy.ID)
	readyNow, _ := f.s.NodeByID(nil, ready.ID)

	out, err := f.s.GCReap(20, &structs.GCReapRequest{Nodes: []structs.GCRef{
		ref("", down.ID, down.ModifyIndex), ref("", busy.ID, busy.ModifyIndex), ref("", readyNow.ID, readyNow.ModifyIndex),
	}})
	must(t, err)
	if out.Nodes != 1 || out.Skipped != 2 {
		t.Fatalf("response %+v", out)
	}
	if n, _ := f.s.NodeByID(nil, down.ID); n != nil {
		t.Error("down node with terminal allocs kept")
	}
}

func TestGCReapTokens(t *testing.T) {
	s := testStore(t)
	t0 := time.Unix(1700000000, 0)
	a1, a2 := uuid.NewString(), uuid.NewString()
	ott := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: a1, ExpiresAt: t0}
	must(t, s.UpsertOneTimeToken(10, ott))
	fresh := &structs.OneTimeToken{OneTimeSecretID: uuid.NewString(), AccessorID: a2, ExpiresAt: t0.Add(time.Hour)}
	must(t, s.UpsertOneTimeToken(11, fresh))
	req := &structs.GCReapRequest{OneTimeTokens: []structs.GCRef{ref("", a1, 10), ref("", a2, 11)}}
	out, err := s.GCReap(12, req) // no time: nothing expires
	must(t, err)
	if out.OneTimeTokens != 0 || out.Skipped != 2 {
		t.Fatalf("unstamped %+v", out)
	}
	out, err = s.At(t0.Add(time.Minute)).GCReap(13, req)
	must(t, err)
	if out.OneTimeTokens != 1 || out.Skipped != 1 {
		t.Fatalf("stamped %+v", out)
	}
	otts, _ := s.OneTimeTokens(nil)
	if len(otts) != 1 || otts[0].AccessorID != a2 {
		t.Errorf("left %v", otts)
	}
}

func TestGCReapBounds(t *testing.T) {
	s := testStore(t)
	req := &structs.GCReapRequest{Allocs: make([]structs.GCRef, structs.MaxGCReapObjects+1)}
	if _, err := s.GCReap(10, req); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("over bounds: %v", err)
	}
	req = &structs.GCReapRequest{Jobs: make([]structs.GCRef, structs.MaxGCReapJobs+1)}
	if _, err := s.GCReap(10, req); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("jobs over bounds: %v", err)
	}
	if s.LatestIndex() == 10 {
		t.Error("a refused entry wrote")
	}
}

// A reaped allocation whose claim is not freed yet writes its volume, so
// the volume watcher, which wakes on volume writes only, releases it.
func TestGCReapWakesClaimedVolume(t *testing.T) {
	s := testStore(t)
	n := csiPluginNode("hp")
	must(t, s.UpsertNode(10, n))
	j := mockJob("sysbatch")
	j.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: structs.VolumeTypeCSI, Source: "v",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	j = storedJob(t, s, 11, j)
	a := mockAlloc(j, n.ID)
	a.ClientStatus = structs.AllocClientStatusRunning
	must(t, s.UpsertAllocs(12, []*structs.Allocation{a}))
	must(t, s.UpsertCSIVolumes(13, []*structs.CSIVolume{csiTestVol("v", "hp")}))
	must(t, s.CSIVolumeClaims(14, []*structs.CSIVolumeClaimRequest{{Namespace: "default", VolumeID: "v", Claim: &structs.CSIVolumeClaim{
		AllocationID: a.ID, Mode: structs.CSIVolumeClaimWrite,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}))
	done := a.Copy()
	done.ClientStatus = structs.AllocClientStatusComplete
	must(t, s.UpdateAllocsFromClient(15, []*structs.Allocation{done}))
	stored, err := s.AllocByID(nil, a.ID)
	must(t, err)
	out, err := s.GCReap(16, &structs.GCReapRequest{Allocs: []structs.GCRef{{ID: a.ID, ModifyIndex: stored.ModifyIndex}}})
	must(t, err)
	if out.Allocs != 1 {
		t.Fatalf("reaped %+v, want the alloc", out)
	}
	v, err := s.CSIVolumeRaw(nil, "default", "v")
	must(t, err)
	if v.ModifyIndex != 16 || v.ClaimFor(a.ID) == nil {
		t.Fatalf("volume after the reap: index %d, claim %+v; want index 16 with the claim still there for the watcher", v.ModifyIndex, v.ClaimFor(a.ID))
	}
}

// TestGCReapKeepsJobStatus: reaping some of a job's terminal allocs
// leaves a dead job dead without rewriting it, and a running job running.
func TestGCReapKeepsJobStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool // one alloc of the job is still running
		want    string
	}{
		{name: "dead job stays dead", want: structs.JobStatusDead},
		{name: "running job stays running", running: true, want: structs.JobStatusRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			job := storedJob(t, s, 10, mockJob("batch"))
			var allocs []*structs.Allocation
			for i := 0; i < 3; i++ {
				a := mockAlloc(job, "gone")
				a.ClientStatus = structs.AllocClientStatusComplete
				if tc.running && i == 2 {
					a.ClientStatus = structs.AllocClientStatusRunning
				}
				allocs = append(allocs, a)
			}
			must(t, s.UpsertAllocs(11, allocs))
			before, err := s.JobByID(nil, job.Namespace, job.ID)
			must(t, err)
			if before.Status != tc.want {
				t.Fatalf("job %s before the reap, want %s", before.Status, tc.want)
			}
			req := &structs.GCReapRequest{}
			for _, a := range allocs[:2] {
				got, err := s.AllocByID(nil, a.ID)
				must(t, err)
				req.Allocs = append(req.Allocs, ref(got.Namespace, got.ID, got.ModifyIndex))
			}
			out, err := s.GCReap(20, req)
			must(t, err)
			if out.Allocs != 2 || out.Skipped != 0 {
				t.Fatalf("response %+v, want 2 allocs reaped", out)
			}
			after, err := s.JobByID(nil, job.Namespace, job.ID)
			must(t, err)
			if after.Status != tc.want || after.ModifyIndex != before.ModifyIndex {
				t.Fatalf("job %s at %d after the reap, want %s at %d", after.Status, after.ModifyIndex, tc.want, before.ModifyIndex)
			}
			left, err := s.AllocsByJob(nil, job.Namespace, job.ID, true)
			must(t, err)
			if len(left) != 1 {
				t.Fatalf("%d allocs left, want 1", len(left))
			}
		})
	}
}

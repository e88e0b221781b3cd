package fsm

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// populate drives f through every kind of entry so that each table holds
// something.
func populate(t *testing.T, f *FSM) {
	t.Helper()
	n := mockNode()
	mustApply(t, f, 10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
	mustApply(t, f, 11, structs.NodeUpdateDrainRequestType, &structs.NodeUpdateDrainRequest{
		NodeID: n.ID, DrainStrategy: &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}})
	job := registerJob(t, f, 12, mockJob("service"))
	job2 := job.Copy()
	job2.Meta = map[string]string{"v": "2"}
	mustApply(t, f, 13, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job2})
	parent := mockJob("batch")
	parent.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "@hourly"}
	mustApply(t, f, 14, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent})
	child := mockJob("batch")
	child.ID, child.ParentID = parent.ID+"/periodic-1700000000", parent.ID
	registerJob(t, f, 15, child)
	cur, _ := f.State().JobByID(nil, job.Namespace, job.ID)
	a1, a2 := mockAlloc(cur, n.ID), mockAlloc(cur, n.ID)
	mustApply(t, f, 16, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: cur, AllocsUpdated: []*structs.Allocation{a1, a2}})
	mustApply(t, f, 17, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{
		ID: a1.ID, ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning, StartedAt: time.Now()}},
	}}})
	mustApply(t, f, 18, structs.SchedulerConfigRequestType, &structs.SchedulerSetConfigRequest{Config: structs.SchedulerConfiguration{SchedulerAlgorithm: "spread"}})
	blocked := mockEval(job.Namespace, job.ID, structs.EvalStatusBlocked)
	mustApply(t, f, 19, structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{blocked}})
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src, _ := testFSM(t)
	populate(t, src)
	data := snapshotBytes(t, src)

	dst, _ := testFSM(t)
	old := dst.State()
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	if dst.State() == old {
		t.Fatal("Restore did not swap in a new store")
	}
	select {
	case <-old.AbandonCh():
	default:
		t.Error("the replaced store's AbandonCh is open")
	}
	want, got := dump(t, src.State()), dump(t, dst.State())
	if len(want) != len(got) {
		t.Errorf("dumps have %d and %d sections", len(want), len(got))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s differs after restore:\n got %s\nwant %s", k, got[k], w)
		}
	}
	if dst.State().LatestIndex() != 19 {
		t.Errorf("restored LatestIndex = %d, want 19", dst.State().LatestIndex())
	}
	// The restored FSM keeps applying the log where the snapshot ended.
	mustApply(t, dst, 20, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})
	if nodes, _ := dst.State().Nodes(nil); len(nodes) != 2 {
		t.Errorf("%d nodes after applying past the snapshot", len(nodes))
	}
}

func TestSnapshotIsConsistentWhileApplying(t *testing.T) {
	f, _ := testFSM(t)
	populate(t, f)
	snap, err := f.Snapshot()
	must(t, err)
	defer snap.Release()
	before := dump(t, f.State())
	// Writes after Snapshot() must not show in what Persist writes.
	mustApply(t, f, 30, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})
	sink := &memSink{}
	must(t, snap.Persist(sink))
	restored, _ := testFSM(t)
	must(t, restored.Restore(io.NopCloser(&sink.Buffer)))
	after := dump(t, restored.State())
	if after["nodes"] != before["nodes"] || after["index:nodes"] != "11" {
		t.Errorf("snapshot includes a later write: nodes index %s", after["index:nodes"])
	}
}

func TestRestoreWakesBlockingQueries(t *testing.T) {
	src, _ := testFSM(t)
	populate(t, src)
	data := snapshotBytes(t, src)

	dst, _ := testFSM(t)
	mustApply(t, dst, 5, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran := make(chan struct{}, 8)
	done := make(chan uint64, 1)
	go func() {
		idx, _ := dst.State().BlockingQuery(ctx, 5, func(ws memdb.WatchSet, s *state.StateStore) (uint64, error) {
			if _, err := s.Nodes(ws); err != nil {
				return 0, err
			}
			ran <- struct{}{}
			return s.Index(state.TableNodes), nil
		})
		done <- idx
	}()
	select {
	case <-ran:
	case <-ctx.Done():
		t.Fatal("blocking query never ran")
	}
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	select {
	case idx := <-done:
		if idx != 11 {
			t.Errorf("query answered index %d, want the restored store's 11", idx)
		}
	case <-ctx.Done():
		t.Fatal("blocking query not woken by the restore")
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	f, _ := testFSM(t)
	populate(t, f)
	before := f.State()
	if err := f.Restore(io.NopCloser(bytes.NewReader([]byte("not a snapshot")))); err == nil {
		t.Fatal("garbage restored")
	}
	if f.State() != before {
		t.Error("a failed restore replaced the state")
	}
	select {
	case <-before.AbandonCh():
		t.Error("a failed restore abandoned the live store")
	default:
	}
}

// BenchmarkSnapshot100kAllocs persists and restores, through the Raft FSM
// interface, a state of 100,000 allocations (100 jobs × 1,000 nodes).
func BenchmarkSnapshot100kAllocs(b *testing.B) {
	f, err := New(nil, nil)
	must(b, err)
	st := f.State()
	index := uint64(1)
	nodes := make([]string, 1000)
	for i := range nodes {
		n := mockNode()
		must(b, st.UpsertNode(index, n))
		nodes[i] = n.ID
		index++
	}
	for j := 0; j < 100; j++ {
		job := mockJob("batch")
		job.Canonicalize()
		must(b, st.UpsertJob(index, job))
		index++
		allocs := make([]*structs.Allocation, len(nodes))
		for i, node := range nodes {
			a := mockAlloc(job, node)
			a.ClientStatus = structs.AllocClientStatusRunning
			a.TaskStates = map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning, StartedAt: time.Now()}}
			allocs[i] = a
		}
		must(b, st.UpsertPlanResults(index, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: allocs}))
		index++
	}
	var data []byte
	b.Run("persist", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			data = snapshotBytes(b, f)
		}
		b.ReportMetric(float64(len(data))/(1<<20), "MB")
	})
	b.Run("restore", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dst, err := New(nil, nil)
			must(b, err)
			must(b, dst.Restore(io.NopCloser(bytes.NewReader(data))))
			if allocs, _ := dst.State().Allocs(nil); len(allocs) != 100000 {
				b.Fatalf("restored %d allocs", len(allocs))
			}
		}
	})
}

package fsm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// recorder is a Hooks that remembers every call.
type recorder struct {
	mu           sync.Mutex
	evals        []*structs.Evaluation
	clientAlloc  []*structs.Allocation
	nodes        []*structs.Node
	upserted     []*structs.Job
	deleted      []string
	volumesFreed []uint64
	// calls names every call in order; onCall, when set, runs first (on
	// the apply goroutine, with mu not held).
	calls  []string
	onCall func(hook string)
}

func (r *recorder) called(hook string) {
	if r.onCall != nil {
		r.onCall(hook)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, hook)
}

func (r *recorder) EvalsCommitted(evals []*structs.Evaluation) {
	r.called("EvalsCommitted")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evals = append(r.evals, evals...)
}

func (r *recorder) AllocsClientUpdated(allocs []*structs.Allocation, _ uint64) {
	r.called("AllocsClientUpdated")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clientAlloc = append(r.clientAlloc, allocs...)
}

func (r *recorder) NodeChanged(node *structs.Node, _ uint64) {
	r.called("NodeChanged")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nodes = append(r.nodes, node)
}

func (r *recorder) JobUpserted(job *structs.Job) {
	r.called("JobUpserted")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.upserted = append(r.upserted, job)
}

func (r *recorder) VolumesFreed(index uint64) {
	r.called("VolumesFreed")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.volumesFreed = append(r.volumesFreed, index)
}

func (r *recorder) JobDeleted(ns, id string) {
	r.called("JobDeleted")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, ns+"/"+id)
}

func testFSM(t testing.TB) (*FSM, *recorder) {
	t.Helper()
	rec := &recorder{}
	f, err := New(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	return f, rec
}

// apply encodes msg as a log entry of type typ at index and applies it.
func apply(t testing.TB, f *FSM, index uint64, typ structs.MessageType, msg any) any {
	t.Helper()
	buf, err := Encode(typ, msg)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf})
}

// mustApply applies and fails on an error response.
func mustApply(t testing.TB, f *FSM, index uint64, typ structs.MessageType, msg any) {
	t.Helper()
	if resp := apply(t, f, index, typ, msg); resp != nil {
		t.Fatalf("apply %s at %d: %v", typeName(typ), index, resp)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mockJob(typ string) *structs.Job {
	return &structs.Job{
		ID:   "job-" + uuid.NewString()[:8],
		Type: typ,
		TaskGroups: []*structs.TaskGroup{{
			Name:  "web",
			Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true", "args": []any{"-x", 1}}}},
		}},
	}
}

func mockNode() *structs.Node {
	return &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n", Datacenter: "dc1",
		NodePool: structs.NodePoolDefault, Status: structs.NodeStatusReady,
		SchedulingEligibility: structs.NodeSchedulingEligible,
	}
}

func mockEval(ns, jobID, status string) *structs.Evaluation {
	return &structs.Evaluation{ID: uuid.NewString(), Namespace: ns, JobID: jobID, Type: "service",
		Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: status}
}

func mockAlloc(job *structs.Job, nodeID string) *structs.Allocation {
	return &structs.Allocation{
		ID: uuid.NewString(), Namespace: job.Namespace, EvalID: uuid.NewString(), NodeID: nodeID,
		Name: structs.AllocName(job.ID, "web", 0), JobID: job.ID, TaskGroup: "web",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
	}
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

// snapshotBytes takes a Raft snapshot of f and persists it to memory.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	must(t, err)
	defer snap.Release()
	sink := &memSink{}
	must(t, snap.Persist(sink))
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v after a good persist", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// dump renders a store's contents and indexes as JSON for comparison.
func dump(t testing.TB, s *state.StateStore) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(name string, v any, err error) {
		t.Helper()
		must(t, err)
		b, err := json.Marshal(v)
		must(t, err)
		out[name] = string(b)
	}
	jobs, err := s.Jobs(nil)
	add("jobs", jobs, err)
	for _, j := range jobs {
		v, err := s.JobVersionsByID(nil, j.Namespace, j.ID)
		add("versions:"+j.ID, v, err)
		sum, err := s.JobSummaryByID(nil, j.Namespace, j.ID)
		add("summary:"+j.ID, sum, err)
		sev, err := s.ScalingEventsByJob(nil, j.Namespace, j.ID)
		add("scaling:"+j.ID, sev, err)
	}
	allocs, err := s.Allocs(nil)
	add("allocs", allocs, err)
	evals, err := s.Evals(nil)
	add("evals", evals, err)
	nodes, err := s.Nodes(nil)
	add("nodes", nodes, err)
	launches, err := s.PeriodicLaunches(nil)
	add("launches", launches, err)
	idx, cfg, err := s.SchedulerConfig()
	add("config", []any{idx, cfg}, err)
	for _, table := range []string{state.TableIndex, state.TableNodes, state.TableJobs, state.TableJobVersions,
		state.TableJobSummary, state.TableEvals, state.TableAllocs, state.TablePeriodicLaunch, state.TableSchedulerConfig} {
		out["index:"+table] = fmt.Sprint(s.Index(table))
	}
	return out
}

package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// call is one write the fake server received.
type call struct {
	Method string
	Args   []any
}

// fakeServer records writes and answers them with canned responses; reads
// go to a real state store.
type fakeServer struct {
	store  *state.StateStore
	leader string
	err    error // returned by every write when set

	mu    sync.Mutex
	calls []call
}

func (f *fakeServer) record(method string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{Method: method, Args: args})
	return f.err
}

func (f *fakeServer) lastCall(t *testing.T) call {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		t.Fatal("server received no call")
	}
	return f.calls[len(f.calls)-1]
}

func (f *fakeServer) numCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeServer) Register(_ context.Context, job *structs.Job, enforce bool, idx uint64) (*structs.JobRegisterResponse, error) {
	if err := f.record("RegisterJob", job, enforce, idx); err != nil {
		return nil, err
	}
	return &structs.JobRegisterResponse{EvalID: "eval-1", EvalCreateIndex: 40, JobModifyIndex: 40, Index: 40}, nil
}

func (f *fakeServer) Deregister(_ context.Context, ns, id string, purge bool) (*structs.JobDeregisterResponse, error) {
	if err := f.record("DeregisterJob", ns, id, purge); err != nil {
		return nil, err
	}
	return &structs.JobDeregisterResponse{EvalID: "eval-2", EvalCreateIndex: 41, Index: 41}, nil
}

func (f *fakeServer) Evaluate(_ context.Context, ns, id string, opts structs.EvalOptions) (*structs.JobRegisterResponse, error) {
	if err := f.record("EvaluateJob", ns, id, opts); err != nil {
		return nil, err
	}
	return &structs.JobRegisterResponse{EvalID: "eval-3", Index: 42}, nil
}

func (f *fakeServer) Scale(_ context.Context, ns, id string, req *structs.ScalingRequest) (*structs.JobRegisterResponse, error) {
	if err := f.record("ScaleJob", ns, id, req); err != nil {
		return nil, err
	}
	return &structs.JobRegisterResponse{EvalID: "eval-7", EvalCreateIndex: 50, JobModifyIndex: 50, Index: 50}, nil
}

func (f *fakeServer) Revert(_ context.Context, ns, id string, version uint64, enforce *uint64) (*structs.JobRegisterResponse, error) {
	if err := f.record("RevertJob", ns, id, version, enforce); err != nil {
		return nil, err
	}
	return &structs.JobRegisterResponse{EvalID: "eval-8", EvalCreateIndex: 51, JobModifyIndex: 51, Index: 51}, nil
}

func (f *fakeServer) Dispatch(_ context.Context, ns string, req *structs.JobDispatchRequest) (*structs.JobDispatchResponse, error) {
	if err := f.record("DispatchJob", ns, req); err != nil {
		return nil, err
	}
	return &structs.JobDispatchResponse{DispatchedJobID: req.JobID + "/dispatch-1-abcd", EvalID: "eval-4", Index: 43}, nil
}

func (f *fakeServer) ForcePeriodic(_ context.Context, ns, id string) (*structs.PeriodicForceResponse, error) {
	if err := f.record("ForcePeriodic", ns, id); err != nil {
		return nil, err
	}
	return &structs.PeriodicForceResponse{EvalID: "eval-5", Index: 44}, nil
}

func (f *fakeServer) Plan(_ context.Context, job *structs.Job, diff bool) (*structs.JobPlanResponse, error) {
	if err := f.record("PlanJob", job, diff); err != nil {
		return nil, err
	}
	return &structs.JobPlanResponse{
		Annotations:    &structs.PlanAnnotations{DesiredTGUpdates: map[string]*structs.DesiredUpdates{"g": {Place: 1}}},
		JobModifyIndex: 7,
		Diff:           &structs.JobDiff{Type: "Added", ID: job.ID},
		Index:          45,
	}, nil
}

func (f *fakeServer) StopAlloc(_ context.Context, id string) (*structs.AllocStopResponse, error) {
	if err := f.record("StopAlloc", id); err != nil {
		return nil, err
	}
	return &structs.AllocStopResponse{EvalID: "eval-6", Index: 46}, nil
}

func (f *fakeServer) UpdateEligibility(_ context.Context, id, elig string) (*structs.NodeEligibilityUpdateResponse, error) {
	if err := f.record("UpdateNodeEligibility", id, elig); err != nil {
		return nil, err
	}
	return &structs.NodeEligibilityUpdateResponse{NodeModifyIndex: 47, Index: 47}, nil
}

func (f *fakeServer) UpdateDrain(_ context.Context, id string, spec *structs.DrainSpec, markEligible bool, meta map[string]string) (*structs.NodeEligibilityUpdateResponse, error) {
	if err := f.record("UpdateNodeDrain", id, spec, markEligible, meta); err != nil {
		return nil, err
	}
	return &structs.NodeEligibilityUpdateResponse{NodeModifyIndex: 48, Index: 48}, nil
}

func (f *fakeServer) SetSchedulerConfig(_ context.Context, cfg *structs.SchedulerConfiguration, cas bool, index uint64) (bool, uint64, error) {
	if err := f.record("SetSchedulerConfig", cfg, cas, index); err != nil {
		return false, 0, err
	}
	return true, 49, nil
}

func (f *fakeServer) ForceGC(context.Context) error { return f.record("ForceGC") }
func (f *fakeServer) ReconcileJobSummaries(context.Context) error {
	return f.record("ReconcileJobSummaries")
}

func (f *fakeServer) State() *state.StateStore { return f.store }
func (f *fakeServer) LeaderAddr() string       { return f.leader }
func (f *fakeServer) Region() string           { return "global" }
func (f *fakeServer) Datacenter() string       { return "dc1" }

// newTestAPI builds an API over a fresh store; cfg may set Client etc.
func newTestAPI(t *testing.T, cfg Config) (*HTTPServer, *fakeServer) {
	t.Helper()
	store, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeServer{store: store, leader: "127.0.0.1:4647"}
	cfg.Server = fake
	return New(cfg), fake
}

// do serves one request in-process.
func do(t *testing.T, h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, r)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decodeJSON decodes a recorder's body, failing the test when it is not JSON.
func decodeJSON[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	var out T
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("body is not the expected JSON: %v\n%s", err, rec.Body.String())
	}
	return out
}

func mustOK(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200; body %q", rec.Code, rec.Body.String())
	}
}

// seed writers: each writes at the given index and fails the test on error.

func testJob(ns, id string) *structs.Job {
	j := &structs.Job{
		ID: id, Name: id, Namespace: ns, Type: "batch",
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}}},
	}
	j.Canonicalize()
	return j
}

func seedJob(t *testing.T, s *state.StateStore, index uint64, job *structs.Job) {
	t.Helper()
	if err := s.UpsertJob(index, job); err != nil {
		t.Fatalf("UpsertJob: %v", err)
	}
}

func seedAlloc(t *testing.T, s *state.StateStore, index uint64, a *structs.Allocation) {
	t.Helper()
	if err := s.UpsertAllocs(index, []*structs.Allocation{a}); err != nil {
		t.Fatalf("UpsertAllocs: %v", err)
	}
}

func seedEval(t *testing.T, s *state.StateStore, index uint64, e *structs.Evaluation) {
	t.Helper()
	if err := s.UpsertEvals(index, []*structs.Evaluation{e}); err != nil {
		t.Fatalf("UpsertEvals: %v", err)
	}
}

func seedNode(t *testing.T, s *state.StateStore, index uint64, n *structs.Node) {
	t.Helper()
	if err := s.UpsertNode(index, n); err != nil {
		t.Fatalf("UpsertNode: %v", err)
	}
}

func toJSONString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

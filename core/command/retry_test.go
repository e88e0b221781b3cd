package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// flaky wraps h: the first n requests get 503 "No cluster leader", as an
// agent answers during a leader election.
func flaky(n int32, h http.HandlerFunc) (http.HandlerFunc, *atomic.Int32) {
	var failed atomic.Int32
	return func(w http.ResponseWriter, r *http.Request) {
		if failed.Load() < n {
			failed.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("No cluster leader"))
			return
		}
		h(w, r)
	}, &failed
}

// The drain monitor outlives a leader election: 503s on both of its reads
// are retried, and the drain is followed to its end.
func TestNodeDrainMonitorRetriesNoLeader(t *testing.T) {
	f := newFakeAgent(t)
	f.json("GET /v1/nodes", []*structs.NodeListStub{testNode().Stub()})
	f.json("POST /v1/node/"+nodeID+"/drain", structs.NodeEligibilityUpdateResponse{Index: 9})
	migrate := true
	var step atomic.Int32
	allocs, allocFails := flaky(3, func(w http.ResponseWriter, r *http.Request) {
		a := testAlloc("t")
		if step.Add(1) >= 2 {
			a.DesiredTransition.Migrate = &migrate
			a.ClientStatus = "complete"
		}
		_ = json.NewEncoder(w).Encode([]*structs.Allocation{a})
	})
	f.handle("GET /v1/node/"+nodeID+"/allocations", allocs)
	node, nodeFails := flaky(2, func(w http.ResponseWriter, r *http.Request) {
		n := testNode()
		if step.Load() < 2 {
			n.DrainStrategy = &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}
		}
		_ = json.NewEncoder(w).Encode(n)
	})
	f.handle("GET /v1/node/"+nodeID, node)

	r := f.run(t, "", "node", "drain", "-enable", "-yes", nodeID)
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.out, `==> Drain complete for node "`+nodeID+`"`)
	if allocFails.Load() != 3 || nodeFails.Load() < 2 {
		t.Errorf("503s served: allocations %d, node %d; want 3 and 2", allocFails.Load(), nodeFails.Load())
	}
}

// The eval monitor of `job run` waits out a leader election on the eval
// and on its allocations.
func TestMonitorRetriesNoLeader(t *testing.T) {
	f := newFakeAgent(t)
	f.json("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: evalID})
	eval := &structs.Evaluation{ID: evalID, JobID: "web", Status: "complete", CreateIndex: 10}
	h, evalFails := flaky(3, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Nomad-Index", "7")
		_ = json.NewEncoder(w).Encode(eval)
	})
	f.handle("GET /v1/evaluation/"+evalID, h)
	ha, allocFails := flaky(2, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]*structs.AllocListStub{})
	})
	f.handle("GET /v1/evaluation/"+evalID+"/allocations", ha)

	r := f.run(t, "", "job", "run", writeJobFile(t, batchHCL))
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.out, `==> Evaluation "4f6c9e5e" finished with status "complete"`)
	if evalFails.Load() != 3 || allocFails.Load() != 2 {
		t.Errorf("503s served: eval %d, allocations %d; want 3 and 2", evalFails.Load(), allocFails.Load())
	}
}

// What is not an outage ends the monitor at once: a 500 is the agent's
// answer.
func TestMonitorDoesNotRetryInternalError(t *testing.T) {
	f := newFakeAgent(t)
	f.json("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: evalID})
	var calls atomic.Int32
	f.handle("GET /v1/evaluation/"+evalID, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("state store: broken"))
	})
	r := f.run(t, "", "job", "run", writeJobFile(t, batchHCL))
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.errOut, "Error reading evaluation", "500")
	if calls.Load() != 1 {
		t.Errorf("the 500 was asked %d times; want once", calls.Load())
	}
}

func TestIsTransient(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&APIError{StatusCode: 503}, true},
		{&APIError{StatusCode: 502}, true},
		{&APIError{StatusCode: 504}, true},
		{fmt.Errorf("wrapped: %w", &APIError{StatusCode: 503}), true},
		{refused, true},
		{&url.Error{Op: "Get", URL: "http://x", Err: errors.New("read: connection reset")}, false},
		{&url.Error{Op: "Get", URL: "http://x", Err: syscall.ECONNRESET}, true},
		{&url.Error{Op: "Get", URL: "http://x", Err: errors.Join(errors.New("x"), errors.New("EOF"))}, false},
		{&url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, false},
		{fmt.Errorf("decoding response: %w", errors.New("unexpected EOF")), false},
		{&APIError{StatusCode: 500}, false},
		{&APIError{StatusCode: 404}, false},
		{&APIError{StatusCode: 400}, false},
		{nil, false},
	} {
		if got := isTransient(tc.err); got != tc.want {
			t.Errorf("isTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A run of transient failures ends with the last error once it outlasts
// the budget, and a success in between gives the next outage the whole
// budget again.
func TestRetrierBudget(t *testing.T) {
	r := &retrier{budget: 50 * time.Millisecond, backoff: time.Millisecond, maxDelay: 10 * time.Millisecond}
	unavailable := &APIError{StatusCode: 503, Body: "No cluster leader"}
	calls := 0
	err := r.do(context.Background(), func() error { calls++; return unavailable })
	if !errors.Is(err, unavailable) || calls < 2 {
		t.Fatalf("after the budget: %v after %d calls; want the 503 after retries", err, calls)
	}
	calls = 0
	if err := r.do(context.Background(), func() error {
		calls++
		if calls < 3 {
			return unavailable
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("a short outage: %v after %d calls; want success after 3", err, calls)
	}
	if !r.since.IsZero() {
		t.Error("a success did not reset the run of failures")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.do(ctx, func() error { return unavailable }); !errors.Is(err, unavailable) {
		t.Errorf("cancelled: %v", err)
	}
}

// `alloc logs -f` waits out a moment without a leader before its stream
// opens.
func TestAllocLogsFollowRetriesNoLeader(t *testing.T) {
	const text = "one\ntwo\n"
	f := newFakeAgent(t)
	serveAlloc(f, testAlloc("t"))
	serveLogs(f, text, 3)
	h, fails := flaky(2, f.routes["GET /v1/client/fs/logs/"+allocID])
	f.handle("GET /v1/client/fs/logs/"+allocID, h)
	r := f.run(t, "", "alloc", "logs", "-f", "8ba8")
	wantCode(t, r, 0)
	if r.out != text || fails.Load() != 2 {
		t.Errorf("stdout %q after %d 503s; want %q after 2", r.out, fails.Load(), text)
	}
}

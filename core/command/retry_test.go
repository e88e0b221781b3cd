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

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/command/clitest"
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
	// Waits out the retry backoff (0.2 s doubling): beside the others.
	t.Parallel()
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/nodes", []*structs.NodeListStub{clitest.TestNode().Stub()})
	f.JSON("POST /v1/node/"+clitest.NodeID+"/drain", structs.NodeEligibilityUpdateResponse{Index: 9})
	migrate := true
	var step atomic.Int32
	allocs, allocFails := flaky(3, func(w http.ResponseWriter, r *http.Request) {
		a := clitest.TestAlloc("t")
		if step.Add(1) >= 2 {
			a.DesiredTransition.Migrate = &migrate
			a.ClientStatus = "complete"
		}
		_ = json.NewEncoder(w).Encode([]*structs.Allocation{a})
	})
	f.Handle("GET /v1/node/"+clitest.NodeID+"/allocations", allocs)
	node, nodeFails := flaky(2, func(w http.ResponseWriter, r *http.Request) {
		n := clitest.TestNode()
		if step.Load() < 2 {
			n.DrainStrategy = &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}
		}
		_ = json.NewEncoder(w).Encode(n)
	})
	f.Handle("GET /v1/node/"+clitest.NodeID, node)

	r := f.Run(t, "", "node", "drain", "-enable", "-yes", clitest.NodeID)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, `==> Drain complete for node "`+clitest.NodeID+`"`)
	if allocFails.Load() != 3 || nodeFails.Load() < 2 {
		t.Errorf("503s served: allocations %d, node %d; want 3 and 2", allocFails.Load(), nodeFails.Load())
	}
}

// The eval monitor of `job run` waits out a leader election on the eval
// and on its allocations.
func TestMonitorRetriesNoLeader(t *testing.T) {
	// Waits out the retry backoff (0.2 s doubling): beside the others.
	t.Parallel()
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: clitest.EvalID})
	eval := &structs.Evaluation{ID: clitest.EvalID, JobID: "web", Status: "complete", CreateIndex: 10}
	h, evalFails := flaky(3, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Nomad-Index", "7")
		_ = json.NewEncoder(w).Encode(eval)
	})
	f.Handle("GET /v1/evaluation/"+clitest.EvalID, h)
	ha, allocFails := flaky(2, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]*structs.AllocListStub{})
	})
	f.Handle("GET /v1/evaluation/"+clitest.EvalID+"/allocations", ha)

	r := f.Run(t, "", "job", "run", clitest.WriteJobFile(t, clitest.BatchHCL))
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, `==> Evaluation "4f6c9e5e" finished with status "complete"`)
	if evalFails.Load() != 3 || allocFails.Load() != 2 {
		t.Errorf("503s served: eval %d, allocations %d; want 3 and 2", evalFails.Load(), allocFails.Load())
	}
}

// What is not an outage ends the monitor at once: a 500 is the agent's
// answer.
func TestMonitorDoesNotRetryInternalError(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("PUT /v1/jobs", structs.JobRegisterResponse{EvalID: clitest.EvalID})
	var calls atomic.Int32
	f.Handle("GET /v1/evaluation/"+clitest.EvalID, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("state store: broken"))
	})
	r := f.Run(t, "", "job", "run", clitest.WriteJobFile(t, clitest.BatchHCL))
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Error reading evaluation", "500")
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
		{&cli.APIError{StatusCode: 503}, true},
		{&cli.APIError{StatusCode: 502}, true},
		{&cli.APIError{StatusCode: 504}, true},
		{fmt.Errorf("wrapped: %w", &cli.APIError{StatusCode: 503}), true},
		{refused, true},
		{&url.Error{Op: "Get", URL: "http://x", Err: errors.New("read: connection reset")}, false},
		{&url.Error{Op: "Get", URL: "http://x", Err: syscall.ECONNRESET}, true},
		{&url.Error{Op: "Get", URL: "http://x", Err: errors.Join(errors.New("x"), errors.New("EOF"))}, false},
		{&url.Error{Op: "Get", URL: "http://x", Err: context.Canceled}, false},
		{fmt.Errorf("decoding response: %w", errors.New("unexpected EOF")), false},
		{&cli.APIError{StatusCode: 500}, false},
		{&cli.APIError{StatusCode: 404}, false},
		{&cli.APIError{StatusCode: 400}, false},
		{nil, false},
	} {
		if got := cli.IsTransient(tc.err); got != tc.want {
			t.Errorf("isTransient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A run of transient failures ends with the last error once it outlasts
// the budget, and a success in between gives the next outage the whole
// budget again.
func TestRetrierBudget(t *testing.T) {
	r := &cli.Retrier{Budget: 50 * time.Millisecond, Backoff: time.Millisecond, MaxDelay: 10 * time.Millisecond}
	unavailable := &cli.APIError{StatusCode: 503, Body: "No cluster leader"}
	calls := 0
	err := r.Do(context.Background(), func() error { calls++; return unavailable })
	if !errors.Is(err, unavailable) || calls < 2 {
		t.Fatalf("after the budget: %v after %d calls; want the 503 after retries", err, calls)
	}
	calls = 0
	if err := r.Do(context.Background(), func() error {
		calls++
		if calls < 3 {
			return unavailable
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("a short outage: %v after %d calls; want success after 3", err, calls)
	}
	if !r.Since.IsZero() {
		t.Error("a success did not reset the run of failures")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Do(ctx, func() error { return unavailable }); !errors.Is(err, unavailable) {
		t.Errorf("cancelled: %v", err)
	}
}

// `alloc logs -f` waits out a moment without a leader before its stream
// opens.
func TestAllocLogsFollowRetriesNoLeader(t *testing.T) {
	// Waits out the retry backoff (0.2 s doubling): beside the others.
	t.Parallel()
	const text = "one\ntwo\n"
	f := clitest.NewFakeAgent(t)
	clitest.ServeAlloc(f, clitest.TestAlloc("t"))
	clitest.ServeLogs(f, text, 3)
	h, fails := flaky(2, f.Routes["GET /v1/client/fs/logs/"+clitest.AllocID])
	f.Handle("GET /v1/client/fs/logs/"+clitest.AllocID, h)
	r := f.Run(t, "", "alloc", "logs", "-f", "8ba8")
	clitest.WantCode(t, r, 0)
	if r.Out != text || fails.Load() != 2 {
		t.Errorf("stdout %q after %d 503s; want %q after 2", r.Out, fails.Load(), text)
	}
}

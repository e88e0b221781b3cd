package csivolumes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, d, what, cond)
}

// The queue hands a call to the node it is addressed to only, delivers
// the result with its kind, and drops results from other nodes.
func TestControllerQueueCallPollDone(t *testing.T) {
	q := NewQueue()
	q.SetEnabled(true)
	ctx := context.Background()
	var wg sync.WaitGroup
	var got *structs.CSIControllerOpResult
	var gotErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, _, gotErr = q.call(ctx, "n1", &structs.CSIControllerOp{Kind: structs.CSIControllerOpPublish, PluginID: "p"})
	}()
	if ops, err := q.Poll(ctx, "n2", 50*time.Millisecond); err != nil || len(ops) != 0 {
		t.Fatalf("another node got %v, %v", ops, err)
	}
	ops, err := q.Poll(ctx, "n1", 10*time.Second)
	if err != nil || len(ops) != 1 || ops[0].Kind != structs.CSIControllerOpPublish {
		t.Fatalf("poll = %v, %v", ops, err)
	}
	q.done("n2", []*structs.CSIControllerOpResult{{ID: ops[0].ID, PublishContext: map[string]string{"from": "n2"}}})
	q.done("n1", []*structs.CSIControllerOpResult{{ID: ops[0].ID, ErrorKind: "not_found", Error: "no such volume"}})
	wg.Wait()
	if !errors.Is(gotErr, structs.ErrNotFound) || gotErr.Error() != "no such volume" || got == nil {
		t.Fatalf("call = %+v, %v", got, gotErr)
	}
}

// A call nobody polls for fails as unavailable after the pickup time; at
// step-down every waiting call fails with no leader.
func TestControllerQueueStepDown(t *testing.T) {
	q := NewQueue()
	q.SetEnabled(true)
	errc := make(chan error, 1)
	go func() {
		_, _, err := q.call(context.Background(), "n1", &structs.CSIControllerOp{Kind: structs.CSIControllerOpUnpublish})
		errc <- err
	}()
	waitFor(t, 10*time.Second, "the call queued", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.pending["n1"]) == 1
	})
	q.SetEnabled(false)
	select {
	case err := <-errc:
		if !errors.Is(err, structs.ErrNoLeader) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting call did not end at step-down")
	}
	if _, _, err := q.call(context.Background(), "n1", &structs.CSIControllerOp{}); !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("call on a disabled queue: %v", err)
	}
	if _, err := q.Poll(context.Background(), "n1", time.Second); !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("poll on a disabled queue: %v", err)
	}
}

// A call that times out is forgotten: a later poll does not get it.
func TestControllerQueueCancelledCallForgotten(t *testing.T) {
	q := NewQueue()
	q.SetEnabled(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := q.call(ctx, "n1", &structs.CSIControllerOp{}); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if ops, _ := q.Poll(context.Background(), "n1", 10*time.Millisecond); len(ops) != 0 {
		t.Fatalf("a forgotten call was handed out: %v", ops)
	}
}

// Calls to one plugin run one at a time.
func TestControllerPluginSerialized(t *testing.T) {
	q := NewQueue()
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := q.lockPlugin(context.Background(), "p")
			if err != nil {
				t.Error(err)
				return
			}
			n := running.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			running.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d calls to one plugin ran at once", most.Load())
	}
	unlock, _ := q.lockPlugin(context.Background(), "p")
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := q.lockPlugin(ctx, "p"); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("a busy plugin: %v", err)
	}
	if u, err := q.lockPlugin(context.Background(), "other"); err != nil {
		t.Fatalf("another plugin waited: %v", err)
	} else {
		u()
	}
}

package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// The queue hands a call to the node it is addressed to only, delivers
// the result with its kind, and drops results from other nodes.
func TestControllerQueueCallPollDone(t *testing.T) {
	q := newControllerQueue()
	q.setEnabled(true)
	ctx := context.Background()
	var wg sync.WaitGroup
	var got *structs.CSIControllerOpResult
	var gotErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		got, _, gotErr = q.call(ctx, "n1", &structs.CSIControllerOp{Kind: structs.CSIControllerOpPublish, PluginID: "p"})
	}()
	if ops, err := q.poll(ctx, "n2", 50*time.Millisecond); err != nil || len(ops) != 0 {
		t.Fatalf("another node got %v, %v", ops, err)
	}
	ops, err := q.poll(ctx, "n1", 10*time.Second)
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
	q := newControllerQueue()
	q.setEnabled(true)
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
	q.setEnabled(false)
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
	if _, err := q.poll(context.Background(), "n1", time.Second); !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("poll on a disabled queue: %v", err)
	}
}

// A call that times out is forgotten: a later poll does not get it.
func TestControllerQueueCancelledCallForgotten(t *testing.T) {
	q := newControllerQueue()
	q.setEnabled(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, _, err := q.call(ctx, "n1", &structs.CSIControllerOp{}); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if ops, _ := q.poll(context.Background(), "n1", 10*time.Millisecond); len(ops) != 0 {
		t.Fatalf("a forgotten call was handed out: %v", ops)
	}
}

// Calls to one plugin run one at a time.
func TestControllerPluginSerialized(t *testing.T) {
	q := newControllerQueue()
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

// The controller call goes to the first ready node with a healthy
// controller; a node that does not take it in time passes it to the next.
func TestControllerCallTriesNextNode(t *testing.T) {
	s := testServer(t, nil)
	s.controllers.pickup = 200 * time.Millisecond
	ctx := context.Background()
	var nodes []*structs.Node
	for _, name := range []string{"a", "b"} {
		n := csiNode(name, "hp", true)
		n.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true,
			ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}
		if _, err := s.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	order, err := s.controllerNodes("hp")
	if err != nil || len(order) != 2 {
		t.Fatalf("controllerNodes = %v, %v", order, err)
	}
	// Only the second in order answers.
	second := nodes[0]
	if second.ID != order[1] {
		second = nodes[1]
	}
	startFakeController(t, s, second, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{PublishContext: map[string]string{"ok": "1"}}
	})
	r, by, err := s.controllerCall(ctx, &structs.CSIControllerOp{Kind: structs.CSIControllerOpPublish, PluginID: "hp"})
	if err != nil || by != second.ID || r.PublishContext["ok"] != "1" {
		t.Fatalf("controllerCall = %+v by %s, %v", r, by, err)
	}
}

// A call its caller gives up on while a controller client runs it keeps
// the plugin's calls serialized: the next call, which would go to another
// controller client, waits until the first client reports its result.
func TestControllerAbandonedCallKeepsPluginLocked(t *testing.T) {
	s := testServer(t, nil)
	s.controllers.pickup = 200 * time.Millisecond
	ctx := context.Background()
	byID := map[string]*structs.Node{}
	for _, name := range []string{"a", "b"} {
		n := csiNode(name, "hp", true)
		n.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true,
			ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}
		if _, err := s.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		byID[n.ID] = n
	}
	order, err := s.controllerNodes("hp")
	if err != nil || len(order) != 2 {
		t.Fatalf("controllerNodes = %v, %v", order, err)
	}
	slow, fast := byID[order[0]], byID[order[1]]

	// The first call is taken by the slow client, which does not answer
	// before the caller gives up.
	taken := make(chan *structs.CSIControllerOp, 1)
	go func() {
		r, err := s.ControllerOps(ctx, &structs.CSIControllerPollArgs{NodeID: slow.ID, SecretID: slow.SecretID, MaxWait: int64(5 * time.Second)})
		if err == nil && len(r.Ops) == 1 {
			taken <- r.Ops[0]
		}
		close(taken)
	}()
	cctx, cancel := context.WithCancel(ctx)
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := s.controllerCall(cctx, &structs.CSIControllerOp{Kind: structs.CSIControllerOpPublish, PluginID: "hp"})
		firstDone <- err
	}()
	op, ok := <-taken
	if !ok {
		t.Fatal("the slow client got no call")
	}
	cancel()
	if err := <-firstDone; !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("abandoned call: %v", err)
	}

	fc := startFakeController(t, s, fast, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{}
	})
	secondDone := make(chan error, 1)
	go func() {
		_, _, err := s.controllerCall(ctx, &structs.CSIControllerOp{Kind: structs.CSIControllerOpUnpublish, PluginID: "hp"})
		secondDone <- err
	}()
	// Unserialized, the second call would reach the fast client after one
	// pickup time; it must still be waiting well past that.
	select {
	case err := <-secondDone:
		t.Fatalf("the second call ran while the first was running on its client: %v (fast client calls %d)", err, len(fc.calls()))
	case <-time.After(5 * s.controllers.pickup):
	}
	if n := len(fc.calls()); n != 0 {
		t.Fatalf("the fast client got %d calls while the plugin was busy", n)
	}
	// The slow client answers at last: the plugin is free.
	if err := s.ControllerDone(ctx, &structs.CSIControllerDoneArgs{NodeID: slow.ID, SecretID: slow.SecretID,
		Results: []*structs.CSIControllerOpResult{{ID: op.ID}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-secondDone:
		if err != nil {
			t.Fatalf("second call: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second call never ran after the first ended")
	}
}

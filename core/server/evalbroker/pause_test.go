package evalbroker

import (
	"context"
	"testing"
	"time"
)

// A paused broker delivers nothing: a blocked Dequeue stays blocked while
// evals are enqueued, an eval delivered before the pause can still be
// acked, and resuming delivers the queued evals in order.
func TestPauseHoldsDeliveries(t *testing.T) {
	b := newBroker(t, testConfig(newFakeClock()))
	b.Enqueue(mkEval("e0", "service", 50, 1, "j0"))
	held, token := mustDequeue(t, b, "service")
	b.SetPaused(true)
	if !b.Paused() {
		t.Fatal("Paused() is false after SetPaused(true)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := dequeueAsync(ctx, b, "service")
	waitWaiters(t, b, 1)
	b.Enqueue(mkEval("e1", "service", 50, 2, "j1"))
	b.Enqueue(mkEval("e2", "service", 90, 3, "j2"))
	waitFor(t, "the evals ready", func() bool { return b.Stats().TotalReady == 2 })
	select {
	case r := <-ch:
		t.Fatalf("a paused broker delivered %v", r.ev)
	default:
	}
	if idle, _ := b.Idle(); !idle {
		t.Error("a paused broker with ready evals is not idle: background work would wait for it")
	}
	if err := b.Ack(held.ID, token); err != nil {
		t.Fatalf("Ack of an eval delivered before the pause: %v", err)
	}
	b.SetPaused(false)
	if r := recvResult(t, ch); r.err != nil || r.ev.ID != "e2" {
		t.Fatalf("first delivery after the pause: %+v; want e2 (highest priority)", r)
	}
	if ev, _ := mustDequeue(t, b, "service"); ev.ID != "e1" {
		t.Fatalf("second delivery: %s; want e1", ev.ID)
	}
}

// Drop forgets ready, pending and delayed evals, keeps an outstanding one
// (returning its ID), passes a dropped eval's job slot to the job's
// pending eval, and takes dropped evals off the cancelable list.
func TestDropForgetsEvals(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))
	b.SetPaused(true)
	b.Enqueue(mkEval("ready", "service", 50, 1, "j1"))
	b.Enqueue(mkEval("pending", "service", 50, 2, "j1")) // waits for j1's slot
	later := mkEval("delayed", "service", 50, 3, "j2")
	later.WaitUntil = clock.Now().Add(time.Hour)
	b.Enqueue(later)
	b.Enqueue(mkEval("other", "service", 50, 4, "j3"))
	b.SetPaused(false)
	held, token := mustDequeue(t, b, "service") // "ready" (lowest index)
	if held.ID != "ready" {
		t.Fatalf("delivered %s; want ready", held.ID)
	}
	// Superseded: a better pending eval of j1 replaces "pending".
	b.Enqueue(mkEval("pending2", "service", 60, 5, "j1"))
	if c := b.Cancelable(0); len(c) != 1 || c[0].ID != "pending" {
		t.Fatalf("cancelable %v; want pending", c)
	}
	b.Enqueue(mkEval("pending3", "service", 40, 6, "j1")) // worse: cancelable
	out := b.Drop([]string{"ready", "pending3", "delayed", "other", "nosuch"})
	if len(out) != 1 || out[0] != "ready" {
		t.Fatalf("Drop kept %v; want [ready] (outstanding)", out)
	}
	if c := b.Cancelable(0); len(c) != 0 {
		t.Errorf("cancelable after Drop: %v; want none (a dropped eval must not be written again)", c)
	}
	st := b.Stats()
	if st.TotalReady != 0 || st.TotalWaiting != 0 {
		t.Errorf("stats after Drop: %+v; want nothing ready or waiting", st)
	}
	clock.Advance(2 * time.Hour) // the dropped delayed eval never comes back
	if err := b.Ack(held.ID, token); err != nil {
		t.Fatal(err)
	}
	// j1's slot goes to its pending eval, pending2.
	if ev, _ := mustDequeue(t, b, "service"); ev.ID != "pending2" {
		t.Fatalf("after Drop: %s delivered; want pending2", ev.ID)
	}
	// Dropping a ready eval that holds its job's slot promotes the
	// job's pending eval.
	b.SetPaused(true)
	b.Enqueue(mkEval("r2", "service", 50, 7, "j4"))
	b.Enqueue(mkEval("p2", "service", 50, 8, "j4"))
	if out := b.Drop([]string{"r2"}); len(out) != 0 {
		t.Fatalf("Drop kept %v", out)
	}
	b.SetPaused(false)
	if ev, _ := mustDequeue(t, b, "service"); ev.ID != "p2" {
		t.Fatalf("after dropping j4's ready eval: %s; want p2", ev.ID)
	}
}

package evalbroker

import (
	"context"
	"testing"
	"time"
)

// Requeue hands an eval back without spending a delivery: however often a
// worker could not start on it, it still gets DeliveryLimit real attempts.
func TestRequeueDoesNotCountDelivery(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(clock)
	cfg.InitialNackDelay, cfg.SubsequentNackDelay = -1, -1
	b := newBroker(t, cfg)
	b.Enqueue(mkEval("e1", "service", 50, 1, "job"))

	for range 2 * cfg.DeliveryLimit {
		ev, token := mustDequeue(t, b, "service")
		if err := b.Requeue(ev.ID, token, 0); err != nil {
			t.Fatal(err)
		}
	}
	// A delayed requeue waits out its delay.
	ev, token := mustDequeue(t, b, "service")
	if err := b.Requeue(ev.ID, token, time.Second); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.TotalWaiting != 1 || s.TotalReady != 0 {
		t.Fatalf("after a delayed requeue: %+v", s)
	}
	clock.Advance(time.Second)
	for i := range cfg.DeliveryLimit {
		ev, token := mustDequeue(t, b, "service")
		if err := b.Nack(ev.ID, token); err != nil {
			t.Fatal(err)
		}
		if s := b.Stats(); (s.TotalFailed == 1) != (i == cfg.DeliveryLimit-1) {
			t.Fatalf("after nack %d: %+v", i+1, s)
		}
	}
	if err := b.Requeue("e1", "bogus", 0); err == nil {
		t.Fatal("Requeue of an eval that is not outstanding succeeded")
	}
}

// DequeueFunc delivers only types its admit function accepts, and never
// the failed queue.
func TestDequeueFuncAdmits(t *testing.T) {
	cfg := testConfig(newFakeClock())
	b := newBroker(t, cfg)
	b.Enqueue(mkEval("a", "hung", 90, 1, "ja"))
	b.Enqueue(mkEval("b", "fine", 10, 2, "jb"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, token, err := b.DequeueFunc(ctx, func(t string) bool { return t != "hung" })
	if err != nil || ev.ID != "b" {
		t.Fatalf("DequeueFunc = %v, %v; want b (a's type is not admitted)", ev, err)
	}
	if err := b.Ack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer stop()
	if ev, _, err := b.DequeueFunc(short, func(t string) bool { return t == FailedQueue }); err == nil {
		t.Fatalf("DequeueFunc handed out %s from the failed queue", ev.ID)
	}
	if ev, _, err := b.DequeueFunc(ctx, func(string) bool { return true }); err != nil || ev.ID != "a" {
		t.Fatalf("DequeueFunc = %v, %v; want a", ev, err)
	}
}

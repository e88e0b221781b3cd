package evalbroker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestDisableFlushesAndWakesWaiters(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))
	b.Enqueue(mkEval("ready", "service", 50, 1, "a"))
	b.Enqueue(mkEval("out", "service", 60, 2, "b"))
	b.Enqueue(mkEval("blocked", "service", 50, 3, "b"))
	delayed := mkEval("delayed", "service", 50, 4, "c")
	delayed.WaitUntil = clock.Now().Add(time.Hour)
	b.Enqueue(delayed)
	out, token := mustDequeue(t, b, "service")

	waiters := []<-chan dequeueResult{
		dequeueAsync(context.Background(), b, "batch"),
		dequeueAsync(context.Background(), b, "system"),
	}
	waitWaiters(t, b, 2)

	b.SetEnabled(false)
	if b.Enabled() {
		t.Fatal("still enabled")
	}
	for i, w := range waiters {
		if r := recvResult(t, w); !errors.Is(r.err, ErrNotEnabled) {
			t.Errorf("waiter %d: %v, want ErrNotEnabled", i, r.err)
		}
	}
	if s := b.Stats(); s.TotalReady+s.TotalUnacked+s.TotalBlocked+s.TotalWaiting != 0 {
		t.Errorf("not flushed: %+v", s)
	}
	if err := b.Ack(out.ID, token); !errors.Is(err, ErrNotEnabled) {
		t.Errorf("Ack while disabled: %v", err)
	}
	if _, _, err := b.Dequeue(context.Background(), []string{"service"}); !errors.Is(err, ErrNotEnabled) {
		t.Errorf("Dequeue while disabled: %v", err)
	}
	b.Enqueue(mkEval("dropped", "service", 50, 5, "d"))
	b.SetEnabled(false) // no-op

	b.SetEnabled(true)
	b.SetEnabled(true) // no-op
	if s := b.Stats(); s.TotalReady != 0 {
		t.Errorf("eval enqueued while disabled survived: %+v", s)
	}
	if err := b.Ack(out.ID, token); !errors.Is(err, ErrNotOutstanding) {
		t.Errorf("Ack of a previous term's delivery: %v", err)
	}
	// The new term works, timers included.
	b.Enqueue(mkEval("fresh", "service", 50, 6, "a"))
	ev, tok := mustDequeue(t, b, "service")
	clock.Advance(time.Minute)
	waitFor(t, "nack timeout in the new term", func() bool {
		_, ok := b.Outstanding(ev.ID)
		return !ok
	})
	if err := b.Ack(ev.ID, tok); !errors.Is(err, ErrNotOutstanding) {
		t.Errorf("Ack after timeout: %v", err)
	}
}

// A waiter from a previous term must not silently carry over into the next
// one, even if the broker is re-enabled before it gets to run.
func TestFlapEndsOldWaiters(t *testing.T) {
	b := newBroker(t, testConfig(newFakeClock()))
	res := dequeueAsync(context.Background(), b, "service")
	waitWaiters(t, b, 1)
	b.SetEnabled(false)
	b.SetEnabled(true)
	b.Enqueue(mkEval("new-term", "service", 50, 1, "a"))
	if r := recvResult(t, res); !errors.Is(r.err, ErrNotEnabled) {
		t.Fatalf("old-term waiter got %v, %v", r.ev, r.err)
	}
	if s := b.Stats(); s.TotalReady != 1 {
		t.Fatalf("new-term eval was taken by an old-term waiter: %+v", s)
	}
}

// TestConcurrentWorkers runs several workers that ack, nack and time out at
// random against many jobs, and checks at-least-once delivery and that no
// two deliveries of one job overlap.
func TestConcurrentWorkers(t *testing.T) {
	b := newBroker(t, Config{
		NackTimeout: 5 * time.Millisecond, InitialNackDelay: -1, SubsequentNackDelay: -1,
		DeliveryLimit: 1000,
	})
	const jobs, perJob, workers = 8, 6, 4

	type delivery struct{ id, token string }
	var mu sync.Mutex
	busy := map[string]delivery{} // job -> delivery being worked on
	acked := map[string]bool{}
	var violation error

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for n := 0; ; n++ {
				ev, token, err := b.Dequeue(ctx, []string{"service", "batch"})
				if err != nil {
					return
				}
				mu.Lock()
				// Another delivery of the job overlaps only if the broker
				// still counts it outstanding; one it took back is dead.
				if other, ok := busy[ev.JobID]; ok && violation == nil {
					if tok, live := b.Outstanding(other.id); live && tok == other.token {
						violation = fmt.Errorf("job %s delivered as %s while %s is outstanding", ev.JobID, ev.ID, other.id)
					}
				}
				busy[ev.JobID] = delivery{ev.ID, token}
				mu.Unlock()

				// "Work": heartbeat and yield, so deliveries have time to overlap.
				_ = b.OutstandingReset(ev.ID, token)
				runtime.Gosched()

				// Release before finishing: once acked or nacked, the next
				// eval of the job may be handed to another worker at once.
				mu.Lock()
				if busy[ev.JobID].token == token {
					delete(busy, ev.JobID)
				}
				mu.Unlock()
				switch (n + w) % 5 {
				case 0:
					_ = b.Nack(ev.ID, token)
				case 1:
					// A dead worker: the nack timer takes the eval back.
				default:
					if err := b.Ack(ev.ID, token); err == nil {
						mu.Lock()
						acked[ev.ID] = true
						mu.Unlock()
					}
				}
			}
		}(w)
	}

	var all []*structs.Evaluation
	for j := 0; j < jobs; j++ {
		for k := 0; k < perJob; k++ {
			typ := "service"
			if j%2 == 1 {
				typ = "batch"
			}
			all = append(all, mkEval(fmt.Sprintf("j%d-e%d", j, k), typ, 50, uint64(k+1), fmt.Sprintf("job%d", j)))
		}
	}
	for _, ev := range all {
		b.Enqueue(ev)
	}

	// Every eval is either acked or superseded (cancelable).
	canceled := map[string]bool{}
	waitFor(t, "every eval acked or canceled", func() bool {
		for _, ev := range b.Cancelable(0) {
			canceled[ev.ID] = true
		}
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range all {
			if !acked[ev.ID] && !canceled[ev.ID] {
				return false
			}
		}
		return true
	})
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if violation != nil {
		t.Fatal(violation)
	}
	for id := range acked {
		if canceled[id] {
			t.Errorf("eval %s both acked and canceled", id)
		}
	}
	if s := b.Stats(); s.TotalReady+s.TotalUnacked+s.TotalBlocked+s.TotalWaiting != 0 {
		t.Errorf("broker not drained: %+v", s)
	}
}

package evalbroker

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a Clock that moves only when Advance is called.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) TimerAt(at time.Time) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: at, ch: make(chan time.Time, 1)}
	if !at.After(c.now) {
		t.ch <- c.now
		return t.ch, func() bool { return false }
	}
	c.timers = append(c.timers, t)
	return t.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the clock and fires the timers that came due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// testConfig is a config with round, distinct durations on a fake clock.
func testConfig(clock Clock) Config {
	return Config{
		NackTimeout:         time.Minute,
		InitialNackDelay:    time.Second,
		SubsequentNackDelay: 20 * time.Second,
		DeliveryLimit:       3,
		Clock:               clock,
	}
}

// newBroker returns an enabled broker that is disabled at cleanup.
func newBroker(t *testing.T, cfg Config) *Broker {
	t.Helper()
	b := New(cfg, nil)
	b.SetEnabled(true)
	t.Cleanup(func() { b.SetEnabled(false) })
	return b
}

func mkEval(id, typ string, prio int, createIndex uint64, jobID string) *structs.Evaluation {
	return &structs.Evaluation{
		ID: id, Namespace: "default", Type: typ, Priority: prio,
		CreateIndex: createIndex, JobID: jobID, Status: structs.EvalStatusPending,
	}
}

// mustDequeue dequeues an eval that is expected to be ready (or to become
// ready soon).
func mustDequeue(t *testing.T, b *Broker, types ...string) (*structs.Evaluation, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, token, err := b.Dequeue(ctx, types)
	if err != nil {
		t.Fatalf("Dequeue(%v): %v", types, err)
	}
	if token == "" {
		t.Fatalf("Dequeue(%v) returned an empty token", types)
	}
	return ev, token
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// dequeueAsync runs Dequeue in a goroutine and returns its outcome channel.
type dequeueResult struct {
	ev    *structs.Evaluation
	token string
	err   error
}

func dequeueAsync(ctx context.Context, b *Broker, types ...string) <-chan dequeueResult {
	ch := make(chan dequeueResult, 1)
	go func() {
		ev, token, err := b.Dequeue(ctx, types)
		ch <- dequeueResult{ev, token, err}
	}()
	return ch
}

func recvResult(t *testing.T, ch <-chan dequeueResult) dequeueResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Dequeue did not return")
		return dequeueResult{}
	}
}

// waitWaiters waits until n Dequeue callers are blocked in the broker.
func waitWaiters(t *testing.T, b *Broker, n int) {
	t.Helper()
	waitFor(t, "blocked Dequeue callers", func() bool { return b.Stats().DequeueWaiters == n })
}

package evalbroker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestDequeueOrder(t *testing.T) {
	cases := []struct {
		name      string
		evals     []*structs.Evaluation
		types     []string
		want      []string
		leftReady int // evals of other types still ready afterwards
	}{
		{
			name: "higher priority first",
			evals: []*structs.Evaluation{
				mkEval("low", "service", 10, 1, "a"),
				mkEval("high", "service", 90, 2, "b"),
				mkEval("mid", "service", 50, 3, "c"),
			},
			types: []string{"service"},
			want:  []string{"high", "mid", "low"},
		},
		{
			name: "FIFO by CreateIndex at equal priority",
			evals: []*structs.Evaluation{
				mkEval("third", "batch", 50, 30, "a"),
				mkEval("first", "batch", 50, 10, "b"),
				mkEval("second", "batch", 50, 20, "c"),
			},
			types: []string{"batch"},
			want:  []string{"first", "second", "third"},
		},
		{
			name: "enqueue order breaks CreateIndex ties",
			evals: []*structs.Evaluation{
				mkEval("x", "batch", 50, 7, "a"),
				mkEval("y", "batch", 50, 7, "b"),
				mkEval("z", "batch", 50, 7, "c"),
			},
			types: []string{"batch"},
			want:  []string{"x", "y", "z"},
		},
		{
			name: "across types by priority then CreateIndex",
			evals: []*structs.Evaluation{
				mkEval("svc-old", "service", 50, 1, "a"),
				mkEval("sys-high", "system", 70, 5, "b"),
				mkEval("batch-new", "batch", 50, 9, "c"),
				mkEval("batch-old", "batch", 50, 2, "d"),
			},
			types: []string{"service", "batch", "system"},
			want:  []string{"sys-high", "svc-old", "batch-old", "batch-new"},
		},
		{
			name: "only the requested types",
			evals: []*structs.Evaluation{
				mkEval("sys", "system", 99, 1, "a"),
				mkEval("svc", "service", 10, 2, "b"),
			},
			types:     []string{"service"},
			want:      []string{"svc"},
			leftReady: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t, testConfig(newFakeClock()))
			b.EnqueueAll(tc.evals)
			var got []string
			for range tc.want {
				ev, token := mustDequeue(t, b, tc.types...)
				got = append(got, ev.ID)
				if err := b.Ack(ev.ID, token); err != nil {
					t.Fatalf("Ack(%s): %v", ev.ID, err)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("order = %v, want %v", got, tc.want)
				}
			}
			if s := b.Stats(); s.TotalReady != tc.leftReady || s.TotalUnacked != 0 {
				t.Errorf("stats after draining: %+v", s)
			}
		})
	}
}

func TestDequeueBlocksUntilEnqueue(t *testing.T) {
	b := newBroker(t, testConfig(newFakeClock()))
	res := dequeueAsync(context.Background(), b, "service", "batch")
	waitWaiters(t, b, 1)

	b.Enqueue(mkEval("other-type", "system", 50, 1, "a"))
	b.Enqueue(mkEval("e1", "batch", 50, 2, "b"))
	r := recvResult(t, res)
	if r.err != nil || r.ev.ID != "e1" {
		t.Fatalf("Dequeue = %v, %v; want e1", r.ev, r.err)
	}
	if tok, ok := b.Outstanding("e1"); !ok || tok != r.token {
		t.Errorf("Outstanding(e1) = %q, %v; want %q", tok, ok, r.token)
	}
	if s := b.Stats(); s.TotalUnacked != 1 || s.TotalReady != 1 || s.DequeueWaiters != 0 {
		t.Errorf("stats = %+v", s)
	}
}

func TestDequeueContextCancel(t *testing.T) {
	b := newBroker(t, testConfig(newFakeClock()))
	ctx, cancel := context.WithCancel(context.Background())
	res := dequeueAsync(ctx, b, "service")
	waitWaiters(t, b, 1)
	cancel()
	if r := recvResult(t, res); !errors.Is(r.err, context.Canceled) || r.ev != nil {
		t.Fatalf("Dequeue after cancel = %v, %v", r.ev, r.err)
	}

	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer dcancel()
	if _, _, err := b.Dequeue(dctx, []string{"service"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dequeue with deadline: %v", err)
	}
	if _, _, err := b.Dequeue(context.Background(), nil); !errors.Is(err, ErrNoTypes) {
		t.Fatalf("Dequeue without types: %v", err)
	}
}

func TestAckAndTokenErrors(t *testing.T) {
	b := newBroker(t, testConfig(newFakeClock()))
	b.Enqueue(mkEval("e1", "service", 50, 1, "a"))
	ev, token := mustDequeue(t, b, "service")

	calls := []struct {
		name string
		fn   func(id, token string) error
	}{
		{"Ack", b.Ack}, {"Nack", b.Nack}, {"OutstandingReset", b.OutstandingReset},
		{"PauseNackTimeout", b.PauseNackTimeout}, {"ResumeNackTimeout", b.ResumeNackTimeout},
	}
	for _, c := range calls {
		if err := c.fn(ev.ID, "wrong"); !errors.Is(err, ErrTokenMismatch) {
			t.Errorf("%s with wrong token: %v, want ErrTokenMismatch", c.name, err)
		}
		if err := c.fn("unknown", token); !errors.Is(err, ErrNotOutstanding) {
			t.Errorf("%s of unknown eval: %v, want ErrNotOutstanding", c.name, err)
		}
	}

	if err := b.Ack(ev.ID, token); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := b.Ack(ev.ID, token); !errors.Is(err, ErrNotOutstanding) {
		t.Errorf("second Ack: %v, want ErrNotOutstanding", err)
	}
	if _, ok := b.Outstanding(ev.ID); ok {
		t.Error("eval still outstanding after Ack")
	}
	if s := b.Stats(); s.TotalReady+s.TotalUnacked+s.TotalWaiting+s.TotalBlocked != 0 {
		t.Errorf("broker not empty after Ack: %+v", s)
	}

	// An acked eval is forgotten: the same ID may be enqueued again.
	b.Enqueue(mkEval("e1", "service", 50, 1, "a"))
	if s := b.Stats(); s.TotalReady != 1 {
		t.Errorf("re-enqueue after Ack: %+v", s)
	}
}

func TestEnqueueIgnoresKnownEvals(t *testing.T) {
	b := newBroker(t, testConfig(newFakeClock()))
	ev := mkEval("e1", "service", 50, 1, "a")
	b.Enqueue(ev)
	b.Enqueue(ev)
	b.EnqueueAll([]*structs.Evaluation{ev, nil})
	b.Enqueue(nil)
	if s := b.Stats(); s.TotalReady != 1 {
		t.Fatalf("duplicate enqueue: %+v", s)
	}
}

func TestReenqueueWhileOutstanding(t *testing.T) {
	cases := []struct {
		name      string
		finish    func(b *Broker, id, token string) error
		wantReady int
	}{
		{"delivered again after ack", (*Broker).Ack, 1},
		{"dropped on nack", (*Broker).Nack, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(newFakeClock())
			cfg.InitialNackDelay = time.Hour // keep the nacked eval out of ready
			b := newBroker(t, cfg)
			b.Enqueue(mkEval("e1", "service", 50, 1, "a"))
			ev, token := mustDequeue(t, b, "service")

			again := ev.Copy()
			again.StatusDescription = "unblocked"
			b.Enqueue(again)
			if s := b.Stats(); s.TotalReady != 0 || s.TotalUnacked != 1 {
				t.Fatalf("re-enqueue of an outstanding eval must wait: %+v", s)
			}
			if err := tc.finish(b, ev.ID, token); err != nil {
				t.Fatal(err)
			}
			if s := b.Stats(); s.TotalReady != tc.wantReady {
				t.Fatalf("ready = %d, want %d (%+v)", s.TotalReady, tc.wantReady, s)
			}
			if tc.wantReady == 1 {
				got, _ := mustDequeue(t, b, "service")
				if got != again {
					t.Errorf("redelivered %+v, want the re-enqueued copy", got)
				}
			}
		})
	}
}

func TestNackRedeliveryDelay(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))
	b.Enqueue(mkEval("e1", "service", 50, 1, "a"))

	for i, delay := range []time.Duration{time.Second, 20 * time.Second} {
		ev, token := mustDequeue(t, b, "service")
		if err := b.Nack(ev.ID, token); err != nil {
			t.Fatalf("nack %d: %v", i+1, err)
		}
		if _, ok := b.Outstanding(ev.ID); ok {
			t.Fatalf("nack %d: still outstanding", i+1)
		}
		if s := b.Stats(); s.TotalWaiting != 1 || s.TotalReady != 0 {
			t.Fatalf("nack %d: want waiting, stats %+v", i+1, s)
		}
		// Nothing is due before the delay has fully passed, so the
		// state cannot change however the timer goroutine is scheduled.
		clock.Advance(delay - time.Nanosecond)
		if s := b.Stats(); s.TotalWaiting != 1 {
			t.Fatalf("nack %d: redelivered before its delay: %+v", i+1, s)
		}
		clock.Advance(time.Nanosecond)
		waitFor(t, "redelivery after nack delay", func() bool { return b.Stats().TotalReady == 1 })
		if err := b.Ack(ev.ID, token); !errors.Is(err, ErrNotOutstanding) {
			t.Fatalf("Ack with a nacked delivery's token: %v", err)
		}
	}
}

func TestNackTimeoutRedelivers(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))
	b.Enqueue(mkEval("e1", "service", 50, 1, "a"))
	ev, token := mustDequeue(t, b, "service")

	clock.Advance(time.Minute - time.Nanosecond)
	if _, ok := b.Outstanding(ev.ID); !ok {
		t.Fatal("nacked before the timeout")
	}
	clock.Advance(time.Nanosecond)
	waitFor(t, "nack timeout", func() bool { return b.Stats().TotalWaiting == 1 })
	if err := b.Ack(ev.ID, token); !errors.Is(err, ErrNotOutstanding) {
		t.Errorf("Ack after timeout: %v, want ErrNotOutstanding", err)
	}
	clock.Advance(time.Second)
	again, token2 := mustDequeue(t, b, "service")
	if again.ID != ev.ID || token2 == token {
		t.Errorf("redelivered %s with token %q (old %q)", again.ID, token2, token)
	}
}

// TestNackTimeoutRealClock runs the same path on the wall clock with short
// durations, so the real timer plumbing is covered too.
func TestNackTimeoutRealClock(t *testing.T) {
	b := newBroker(t, Config{NackTimeout: 20 * time.Millisecond, InitialNackDelay: -1})
	b.Enqueue(mkEval("e1", "service", 50, 1, "a"))
	_, token := mustDequeue(t, b, "service")
	ev, token2 := mustDequeue(t, b, "service") // blocks until the timeout fires
	if ev.ID != "e1" || token2 == token {
		t.Fatalf("redelivery = %s/%q", ev.ID, token2)
	}
	if err := b.Ack(ev.ID, token2); err != nil {
		t.Fatal(err)
	}
}

func TestDeliveryLimitMovesToFailedQueue(t *testing.T) {
	cfg := testConfig(newFakeClock())
	cfg.InitialNackDelay, cfg.SubsequentNackDelay = -1, -1
	b := newBroker(t, cfg)
	b.Enqueue(mkEval("e1", "service", 50, 1, "job"))
	b.Enqueue(mkEval("e2", "service", 50, 2, "job"))

	for i := 0; i < cfg.DeliveryLimit; i++ {
		ev, token := mustDequeue(t, b, "service")
		if ev.ID != "e1" {
			t.Fatalf("delivery %d: got %s; the job's pending eval must not overtake", i+1, ev.ID)
		}
		if err := b.Nack(ev.ID, token); err != nil {
			t.Fatal(err)
		}
	}
	s := b.Stats()
	if s.TotalFailed != 1 || s.TotalReady != 0 || s.TotalBlocked != 1 || s.ByType[FailedQueue].Ready != 1 {
		t.Fatalf("after the delivery limit: %+v", s)
	}

	ev, token := mustDequeue(t, b, FailedQueue)
	if ev.ID != "e1" {
		t.Fatalf("failed queue gave %s", ev.ID)
	}
	// A nack from the leader puts it straight back in the failed queue.
	if err := b.Nack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.TotalFailed != 1 {
		t.Fatalf("nacked failed eval: %+v", s)
	}
	ev, token = mustDequeue(t, b, FailedQueue)
	if err := b.Ack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	// Acking the failed eval frees its job for the pending one.
	next, _ := mustDequeue(t, b, "service")
	if next.ID != "e2" {
		t.Fatalf("after the failed eval's ack got %s, want e2", next.ID)
	}
}

func TestPauseResumeNackTimeout(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))
	b.Enqueue(mkEval("e1", "service", 50, 1, "a"))
	ev, token := mustDequeue(t, b, "service")

	if err := b.PauseNackTimeout(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	if err := b.OutstandingReset(ev.ID, token); err != nil { // must not re-arm
		t.Fatal(err)
	}
	clock.Advance(10 * time.Minute)
	if _, ok := b.Outstanding(ev.ID); !ok {
		t.Fatal("paused eval timed out")
	}

	if err := b.ResumeNackTimeout(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	if err := b.OutstandingReset(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	// 30s after the reset the original deadline has passed, the reset one not.
	clock.Advance(time.Minute - time.Nanosecond)
	if _, ok := b.Outstanding(ev.ID); !ok {
		t.Fatal("OutstandingReset did not push the deadline")
	}
	clock.Advance(time.Nanosecond)
	waitFor(t, "resumed timer to fire", func() bool {
		_, ok := b.Outstanding(ev.ID)
		return !ok
	})
}

func TestPerJobSerialisation(t *testing.T) {
	cases := []struct {
		name       string
		pending    []*structs.Evaluation
		wantNext   string
		wantCancel []string
	}{
		{
			name:     "single pending",
			pending:  []*structs.Evaluation{mkEval("p1", "service", 50, 2, "job")},
			wantNext: "p1",
		},
		{
			name: "newest wins at equal priority",
			pending: []*structs.Evaluation{
				mkEval("p1", "service", 50, 2, "job"),
				mkEval("p2", "service", 50, 3, "job"),
				mkEval("p3", "service", 50, 4, "job"),
			},
			wantNext:   "p3",
			wantCancel: []string{"p1", "p2"},
		},
		{
			name: "higher priority beats newer",
			pending: []*structs.Evaluation{
				mkEval("hi", "service", 80, 2, "job"),
				mkEval("lo", "service", 50, 3, "job"),
			},
			wantNext:   "hi",
			wantCancel: []string{"lo"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t, testConfig(newFakeClock()))
			b.Enqueue(mkEval("first", "service", 50, 1, "job"))
			b.Enqueue(mkEval("other", "service", 10, 1, "other-job"))
			b.EnqueueAll(tc.pending)

			s := b.Stats()
			if s.TotalReady != 2 || s.TotalBlocked != 1 || s.TotalCancelable != len(tc.wantCancel) {
				t.Fatalf("stats %+v", s)
			}
			first, token := mustDequeue(t, b, "service")
			other, otherToken := mustDequeue(t, b, "service")
			if first.ID != "first" || other.ID != "other" {
				t.Fatalf("got %s, %s; the job's pending evals must wait", first.ID, other.ID)
			}
			if err := b.Ack(other.ID, otherToken); err != nil {
				t.Fatal(err)
			}
			if s := b.Stats(); s.TotalReady != 0 {
				t.Fatalf("a pending eval became ready while its job is outstanding: %+v", s)
			}

			var canceled []string
			for _, ev := range b.Cancelable(0) {
				canceled = append(canceled, ev.ID)
			}
			if len(canceled) != len(tc.wantCancel) {
				t.Fatalf("cancelable = %v, want %v", canceled, tc.wantCancel)
			}
			for i := range canceled {
				if canceled[i] != tc.wantCancel[i] {
					t.Fatalf("cancelable = %v, want %v", canceled, tc.wantCancel)
				}
			}
			if err := b.Ack(first.ID, token); err != nil {
				t.Fatal(err)
			}
			next, _ := mustDequeue(t, b, "service")
			if next.ID != tc.wantNext {
				t.Fatalf("after ack got %s, want %s", next.ID, tc.wantNext)
			}
		})
	}
}

func TestNackKeepsJobSlot(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))
	b.Enqueue(mkEval("e1", "service", 50, 1, "job"))
	b.Enqueue(mkEval("e2", "service", 50, 2, "job"))
	ev, token := mustDequeue(t, b, "service")
	if err := b.Nack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	if s := b.Stats(); s.TotalReady != 0 || s.TotalBlocked != 1 || s.TotalWaiting != 1 {
		t.Fatalf("after nack: %+v", s)
	}
	clock.Advance(time.Second)
	again, _ := mustDequeue(t, b, "service")
	if again.ID != "e1" {
		t.Fatalf("got %s, want the nacked e1 back first", again.ID)
	}
}

func TestCancelableDrainsInBatches(t *testing.T) {
	b := newBroker(t, testConfig(newFakeClock()))
	b.Enqueue(mkEval("head", "service", 50, 1, "job"))
	for i := uint64(2); i <= 6; i++ {
		b.Enqueue(mkEval(string(rune('a'+i)), "service", 50, i, "job"))
	}
	// Four of the five waiting evals were superseded.
	if got := len(b.Cancelable(3)); got != 3 {
		t.Fatalf("first batch = %d, want 3", got)
	}
	if got := len(b.Cancelable(3)); got != 1 {
		t.Fatalf("second batch = %d, want 1", got)
	}
	if got := b.Cancelable(3); got != nil {
		t.Fatalf("third batch = %v, want nil", got)
	}
}

func TestWaitAndWaitUntil(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))

	until := mkEval("until", "service", 50, 1, "a")
	until.WaitUntil = clock.Now().Add(time.Hour)
	wait := mkEval("wait", "service", 50, 2, "b")
	wait.Wait = 10 * time.Second
	past := mkEval("past", "service", 50, 3, "c")
	past.WaitUntil = clock.Now().Add(-time.Hour)
	b.EnqueueAll([]*structs.Evaluation{until, wait, past})

	if s := b.Stats(); s.TotalReady != 1 || s.TotalWaiting != 2 || s.TotalDelayed != 1 {
		t.Fatalf("initial stats %+v", s)
	}
	clock.Advance(10 * time.Second)
	waitFor(t, "Wait to pass", func() bool { return b.Stats().TotalReady == 2 })
	clock.Advance(time.Hour)
	waitFor(t, "WaitUntil to pass", func() bool { return b.Stats().TotalReady == 3 })
	for _, want := range []string{"until", "wait", "past"} {
		if ev, _ := mustDequeue(t, b, "service"); ev.ID != want {
			t.Fatalf("got %s, want %s", ev.ID, want)
		}
	}
}

// A delayed eval of a busy job joins the job's pending slot when it is due.
func TestDelayedEvalRespectsJobSlot(t *testing.T) {
	clock := newFakeClock()
	b := newBroker(t, testConfig(clock))
	b.Enqueue(mkEval("now", "service", 50, 1, "job"))
	later := mkEval("later", "service", 50, 2, "job")
	later.WaitUntil = clock.Now().Add(time.Minute / 2)
	b.Enqueue(later)
	ev, token := mustDequeue(t, b, "service")
	clock.Advance(time.Minute / 2)
	waitFor(t, "delayed eval to reach the job's slot", func() bool { return b.Stats().TotalBlocked == 1 })
	if err := b.Ack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	if next, _ := mustDequeue(t, b, "service"); next.ID != "later" {
		t.Fatalf("got %s", next.ID)
	}
}

package evalbroker

import (
	"testing"
	"time"
)

// TestIdle follows Idle through every kind of transition, checking it
// against the counts of Stats after each step, and the time it reports
// against the fake clock.
func TestIdle(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig(clock)
	cfg.DeliveryLimit = 2
	b := newBroker(t, cfg)

	// check asserts Idle's answer, that it agrees with Stats, and, when
	// idle, the time it has been since.
	check := func(step string, wantIdle bool, wantSince time.Time) {
		t.Helper()
		idle, since := b.Idle()
		s := b.Stats()
		working := s.TotalReady
		for q, ts := range s.ByType {
			if q != FailedQueue {
				working += ts.Unacked
			}
		}
		if idle != wantIdle || idle != (working == 0) {
			t.Fatalf("%s: Idle() = %v, want %v (stats: %+v)", step, idle, wantIdle, s)
		}
		if idle && !since.Equal(wantSince) {
			t.Fatalf("%s: idle since %v, want %v", step, since, wantSince)
		}
	}
	start := clock.Now()
	check("new broker", true, start)

	b.Enqueue(mkEval("e1", "service", 50, 1, "job"))
	b.Enqueue(mkEval("e2", "service", 50, 2, "job")) // pending behind e1
	check("enqueued", false, time.Time{})

	ev, token := mustDequeue(t, b, "service")
	check("delivered", false, time.Time{})

	clock.Advance(time.Second)
	if err := b.Ack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	check("acked: the job's pending eval is ready", false, time.Time{})

	ev, token = mustDequeue(t, b, "service")
	clock.Advance(time.Second)
	if err := b.Nack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	afterNack := clock.Now()
	check("nacked: held back by the nack delay", true, afterNack)

	clock.Advance(cfg.InitialNackDelay)
	waitFor(t, "redelivery after the nack delay", func() bool { idle, _ := b.Idle(); return !idle })
	ev, token = mustDequeue(t, b, "service")
	clock.Advance(time.Second)
	if err := b.Nack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	toFailed := clock.Now()
	check("delivery limit reached: in the failed queue", true, toFailed)

	ev, token = mustDequeue(t, b, FailedQueue)
	check("failed eval delivered to the leader's reaper", true, toFailed)
	if err := b.Ack(ev.ID, token); err != nil {
		t.Fatal(err)
	}
	check("failed eval acked", true, toFailed)

	b.Enqueue(mkEval("e3", "batch", 50, 3, "other"))
	check("another job's eval", false, time.Time{})
	b.SetEnabled(false)
	b.SetEnabled(true)
	check("disabled and enabled again", true, clock.Now())
}

package gcengine

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestGCPacerYieldsToScheduling drives the pacer on a fake clock: after
// the share pause, a step waits for the broker to be quiet for Quiet (and
// goes anyway after MaxYield), then while Go's collector marks (and goes
// anyway after MarkWait).
func TestGCPacerYieldsToScheduling(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ms = time.Millisecond
	cases := []struct {
		name string
		// busyUntil: the broker is busy until t0+busyUntil, then idle
		// from that moment; negative: idle since long before.
		busyUntil time.Duration
		// markUntil: Go marks until t0+markUntil; markWait: MarkWait.
		markUntil, markWait time.Duration
		wantWaited          time.Duration // share pause included
		wantForced          int
	}{
		{name: "idle long before: only the share pause", busyUntil: -1, wantWaited: 40 * ms},
		{name: "busy through the pause, quiet after", busyUntil: 100 * ms, wantWaited: 120 * ms},
		{name: "idle just before the pause ends", busyUntil: 35 * ms, wantWaited: 55 * ms},
		{name: "never idle: past scheduling after MaxYield", busyUntil: time.Hour, wantWaited: 40*ms + 500*ms, wantForced: 1},
		{name: "Go's mark ends during the pause", busyUntil: -1, markUntil: 30 * ms, markWait: time.Second, wantWaited: 40 * ms},
		{name: "Go's mark ends after the pause", busyUntil: -1, markUntil: 72 * ms, markWait: time.Second, wantWaited: 75 * ms},
		{name: "Go's mark outlasts MarkWait", busyUntil: -1, markUntil: time.Hour, markWait: 100 * ms, wantWaited: 140 * ms, wantForced: 1},
		{name: "MarkWait 0 never waits for Go's mark", busyUntil: -1, markUntil: time.Hour, wantWaited: 40 * ms},
		{name: "quiet first, then Go's mark", busyUntil: 100 * ms, markUntil: 150 * ms, markWait: time.Second, wantWaited: 150 * ms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			var st Stats
			p := &Pacer{
				p: Pacing{Share: 0.2, MinPause: 10 * ms, MaxPause: 2 * time.Second, Quiet: 20 * ms, MaxYield: 500 * ms, MarkWait: tc.markWait},
				idle: func() (bool, time.Time) {
					if tc.busyUntil < 0 {
						return true, t0.Add(-time.Hour)
					}
					end := t0.Add(tc.busyUntil)
					return !now.Before(end), end
				},
				marking: func() bool { return now.Before(t0.Add(tc.markUntil)) },
				stats:   &st,
				now:     func() time.Time { return now },
				sleep: func(_ context.Context, d time.Duration) error {
					if d <= 0 {
						t.Fatalf("slept %v", d)
					}
					now = now.Add(d)
					return nil
				},
			}
			if tc.markUntil == 0 {
				p.marking = nil
			}
			if err := p.Wait(context.Background()); err != nil || now != t0 {
				t.Fatalf("first step waited %v (err %v); want none", now.Sub(t0), err)
			}
			p.Took(10 * ms) // pause: 10ms * 0.8 / 0.2 = 40ms
			if err := p.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := now.Sub(t0); got != tc.wantWaited {
				t.Errorf("waited %v, want %v", got, tc.wantWaited)
			}
			if st.Forced != tc.wantForced {
				t.Errorf("steps past scheduling or Go's mark = %d, want %d", st.Forced, tc.wantForced)
			}
		})
	}
}

// TestGCPacerCanceled: a canceled context ends the wait with its error.
func TestGCPacerCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &Pacer{p: DefaultPacing(), idle: func() (bool, time.Time) { return false, time.Time{} }}
	p.Took(time.Millisecond)
	if err := p.Wait(ctx); err != context.Canceled {
		t.Fatalf("wait on a canceled context = %v, want context.Canceled", err)
	}
}

// TestGoMarkWatch: the arithmetic, and the runtime's own counters once a
// collection has finished.
func TestGoMarkWatch(t *testing.T) {
	for _, tc := range []struct {
		pauses, cycles uint64
		want           bool
	}{
		{0, 0, false}, {1, 0, true}, {2, 1, false}, {7, 3, true}, {8, 4, false},
		{5, 3, false}, // read between a cycle's count and its second pause
	} {
		if got := markInProgress(tc.pauses, tc.cycles); got != tc.want {
			t.Errorf("markInProgress(%d, %d) = %v, want %v", tc.pauses, tc.cycles, got, tc.want)
		}
	}
	w := newGoMarkWatch()
	runtime.GC()
	// Nothing else in this test allocates enough to start a cycle, but
	// the package's other goroutines might: look a few times.
	deadline := time.Now().Add(5 * time.Second)
	for w.marking() {
		if time.Now().After(deadline) {
			t.Fatal("Go's collector reported marking for 5s after runtime.GC returned")
		}
		runtime.GC()
	}
	if w.samples[1].Value.Uint64() == 0 {
		t.Fatalf("cycles after runtime.GC: %d", w.samples[1].Value.Uint64())
	}
}

// TestGCPacerIdle: a step after the cluster has been quiet for IdleAfter
// goes at once, past the share pause and Go's mark phase, and is an idle
// one; quiet for less, it is paced as busy.
func TestGCPacerIdle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ms = time.Millisecond
	cases := []struct {
		name       string
		quietFor   time.Duration // at t0; negative: busy
		idleAfter  time.Duration
		wantWaited time.Duration
		wantIdle   bool
	}{
		{name: "quiet past IdleAfter: no pause, no mark wait", quietFor: 2 * time.Second, idleAfter: time.Second, wantIdle: true},
		{name: "quiet exactly IdleAfter", quietFor: time.Second, idleAfter: time.Second, wantIdle: true},
		{name: "quiet less than IdleAfter: busy pacing", quietFor: 100 * ms, idleAfter: time.Second, wantWaited: 40*ms + 100*ms},
		{name: "busy: busy pacing", quietFor: -1, idleAfter: time.Second, wantWaited: 40*ms + 100*ms},
		{name: "IdleAfter 0 never idle", quietFor: time.Hour, wantWaited: 40*ms + 100*ms},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			p := &Pacer{
				p: Pacing{Share: 0.2, MinPause: 10 * ms, MaxPause: 2 * time.Second, Quiet: 20 * ms, MaxYield: 500 * ms,
					MarkWait: 100 * ms, IdleAfter: tc.idleAfter},
				idle: func() (bool, time.Time) {
					if tc.quietFor < 0 {
						return false, t0
					}
					return true, t0.Add(-tc.quietFor)
				},
				// Go marks throughout: an idle step does not wait for
				// it, a busy one waits MarkWait.
				marking: func() bool { return true },
				now:     func() time.Time { return now },
				sleep: func(_ context.Context, d time.Duration) error {
					now = now.Add(d)
					return nil
				},
			}
			if tc.quietFor < 0 {
				// Busy throughout: the yield gives up after MaxYield;
				// shorten it so that the sums stay readable.
				p.p.MaxYield = 0
				p.p.MarkWait = 100 * ms
			}
			p.Took(10 * ms) // busy pause: 40ms
			if err := p.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := now.Sub(t0); got != tc.wantWaited {
				t.Errorf("waited %v, want %v", got, tc.wantWaited)
			}
			if p.Idle() != tc.wantIdle {
				t.Errorf("idle step = %v, want %v", p.Idle(), tc.wantIdle)
			}
		})
	}
}

// TestGCSizerLanes: busy and idle entries are sized to their own targets
// from the same measured cost per object, each growing at most twofold
// per entry and shrinking at once, within [MinBatch, BatchObjects].
func TestGCSizerLanes(t *testing.T) {
	const us = time.Microsecond
	z := newSizer(Pacing{EntryTarget: time.Millisecond, IdleEntryTarget: 20 * time.Millisecond, MinBatch: 16, BatchObjects: 2000})
	if z.next(false) != 16 || z.next(true) != 16 {
		t.Fatalf("first sizes busy %d idle %d, want 16 (nothing measured)", z.next(false), z.next(true))
	}
	// 10µs an object: busy fits 100, idle 2000; both grow twofold at most.
	for i, want := range []struct{ busy, idle int }{{32, 32}, {64, 64}, {100, 128}, {100, 256}, {100, 512}, {100, 1024}, {100, 2000}, {100, 2000}} {
		z.committed(50, 500*us)
		if z.next(false) != want.busy || z.next(true) != want.idle {
			t.Fatalf("entry %d: busy %d idle %d, want %d %d", i, z.next(false), z.next(true), want.busy, want.idle)
		}
	}
	// 100µs an object: busy to the floor at once, idle to 200.
	z.committed(10, time.Millisecond)
	if z.next(false) != 16 || z.next(true) != 200 {
		t.Fatalf("after a slow entry: busy %d idle %d, want 16 200", z.next(false), z.next(true))
	}
	// Without a target both hold BatchObjects.
	z = newSizer(Pacing{IdleEntryTarget: 20 * time.Millisecond, MinBatch: 16, BatchObjects: 2000})
	z.committed(10, time.Second)
	if z.next(false) != 2000 || z.next(true) != 2000 {
		t.Fatalf("no target: busy %d idle %d, want 2000", z.next(false), z.next(true))
	}
}

package server

import (
	"context"
	"testing"
	"time"
)

// TestGCPacerYieldsToScheduling drives the pacer on a fake clock: after
// the share pause, a step waits for the broker to be quiet for Quiet, and
// goes anyway after MaxYield.
func TestGCPacerYieldsToScheduling(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ms = time.Millisecond
	cases := []struct {
		name string
		// busyUntil: the broker is busy until t0+busyUntil, then idle
		// from that moment; negative: idle since long before.
		busyUntil  time.Duration
		wantWaited time.Duration // share pause included
		wantForced int
	}{
		{name: "idle long before: only the share pause", busyUntil: -1, wantWaited: 40 * ms},
		{name: "busy through the pause, quiet after", busyUntil: 100 * ms, wantWaited: 120 * ms},
		{name: "idle just before the pause ends", busyUntil: 35 * ms, wantWaited: 55 * ms},
		{name: "never idle: past scheduling after MaxYield", busyUntil: time.Hour, wantWaited: 40*ms + 500*ms, wantForced: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			var st gcStats
			p := &gcPacer{
				p: gcPacing{Share: 0.2, MinPause: 10 * ms, MaxPause: 2 * time.Second, Quiet: 20 * ms, MaxYield: 500 * ms},
				idle: func() (bool, time.Time) {
					if tc.busyUntil < 0 {
						return true, t0.Add(-time.Hour)
					}
					end := t0.Add(tc.busyUntil)
					return !now.Before(end), end
				},
				stats: &st,
				now:   func() time.Time { return now },
				sleep: func(_ context.Context, d time.Duration) error {
					if d <= 0 {
						t.Fatalf("slept %v", d)
					}
					now = now.Add(d)
					return nil
				},
			}
			if err := p.wait(context.Background()); err != nil || now != t0 {
				t.Fatalf("first step waited %v (err %v); want none", now.Sub(t0), err)
			}
			p.took(10 * ms) // pause: 10ms * 0.8 / 0.2 = 40ms
			if err := p.wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := now.Sub(t0); got != tc.wantWaited {
				t.Errorf("waited %v, want %v", got, tc.wantWaited)
			}
			if st.forced != tc.wantForced {
				t.Errorf("steps past scheduling = %d, want %d", st.forced, tc.wantForced)
			}
		})
	}
}

// TestGCPacerCanceled: a canceled context ends the wait with its error.
func TestGCPacerCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &gcPacer{p: defaultGCPacing(), idle: func() (bool, time.Time) { return false, time.Time{} }}
	p.took(time.Millisecond)
	if err := p.wait(ctx); err != context.Canceled {
		t.Fatalf("wait on a canceled context = %v, want context.Canceled", err)
	}
}

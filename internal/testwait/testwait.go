// Package testwait waits in tests on a condition with a deadline: a test
// never sleeps for a fixed time to let something happen, it polls what it
// waits for and fails, naming it, when the deadline passes.
package testwait

import (
	"testing"
	"time"
)

// Poll is how often For asks again.
const Poll = 5 * time.Millisecond

// For waits until cond holds, failing t (naming what) after d.
func For(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	Every(t, d, Poll, what, cond)
}

// Every is For asking every interval: a benchmark that polls an agent
// under measurement asks less often, so the waiting weighs little on what
// is measured.
func Every(t testing.TB, d, every time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		<-tick.C
	}
}

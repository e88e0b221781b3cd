package evalbroker

import "time"

// Clock is the broker's time source. Every deadline the broker keeps (nack
// timeouts, nack delays, Eval.Wait and Eval.WaitUntil) is an absolute time
// read from Now, so a fake clock can drive them deterministically in tests.
type Clock interface {
	Now() time.Time
	// NewTimer returns a channel that receives once d has elapsed (at once
	// when d <= 0) and a function that stops the timer.
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

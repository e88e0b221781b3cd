package evalbroker

import "time"

// Clock is the broker's time source. Every deadline the broker keeps (nack
// timeouts, nack delays, Eval.Wait and Eval.WaitUntil) is an absolute time
// read from Now, so a fake clock can drive them deterministically in tests.
type Clock interface {
	Now() time.Time
	// TimerAt returns a channel that receives once Now() reaches at (at
	// once if it already has) and a function that stops the timer. The
	// deadline is absolute so that a fake clock moved between reading Now
	// and arming the timer cannot push it later.
	TimerAt(at time.Time) (<-chan time.Time, func() bool)
}

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) TimerAt(at time.Time) (<-chan time.Time, func() bool) {
	t := time.NewTimer(time.Until(at))
	return t.C, t.Stop
}

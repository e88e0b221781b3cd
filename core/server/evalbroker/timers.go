package evalbroker

import (
	"container/heap"
	"time"
)

// One goroutine per enabled period serves every deadline the broker keeps:
// nack timeouts, nack delays, Eval.Wait and Eval.WaitUntil. Keeping them in
// one heap, instead of a runtime timer per eval, gives every goroutine an
// owner (SetEnabled(false) stops it) and lets a fake Clock drive them all.

// armLocked sets e's deadline, arming it if it was not armed.
func (b *Broker) armLocked(e *entry, due time.Time) {
	e.due = due
	if e.timerIdx >= 0 {
		heap.Fix(&b.timers, e.timerIdx)
	} else {
		heap.Push(&b.timers, e)
	}
	if b.timers[0] == e {
		select {
		case b.kick <- struct{}{}:
		default:
		}
	}
}

// disarmLocked removes e's deadline if it has one. The loop is not woken: at
// worst it wakes once for nothing.
func (b *Broker) disarmLocked(e *entry) {
	if e.timerIdx >= 0 {
		heap.Remove(&b.timers, e.timerIdx)
	}
}

// run is the timer loop of one enabled period.
func (b *Broker) run(stop <-chan struct{}, kick <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	for {
		b.mu.Lock()
		next, armed := b.fireDueLocked()
		b.mu.Unlock()

		var fire <-chan time.Time
		stopTimer := func() bool { return false }
		if armed {
			fire, stopTimer = b.clock.TimerAt(next)
		}
		select {
		case <-stop:
			stopTimer()
			return
		case <-kick:
		case <-fire:
		}
		stopTimer()
	}
}

// fireDueLocked handles every deadline that has passed and returns the next
// one, if any.
func (b *Broker) fireDueLocked() (time.Time, bool) {
	if !b.enabled {
		return time.Time{}, false
	}
	now := b.clock.Now()
	for len(b.timers) > 0 {
		e := b.timers[0]
		if e.due.After(now) {
			return e.due, true
		}
		heap.Pop(&b.timers)
		switch e.state {
		case stateUnacked:
			b.logger.Warn("eval nack timeout reached; redelivering",
				"eval_id", e.eval.ID, "job_id", e.eval.JobID, "deliveries", e.deliveries)
			b.nackLocked(e)
		case stateWaiting, stateDelayed:
			b.admitLocked(e)
		}
	}
	return time.Time{}, false
}

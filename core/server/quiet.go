package server

import (
	"sync"
	"time"
)

// writeQuiet tracks the leader's Raft writes other than the garbage
// collector's own: how many are in flight and since when none has been.
// GC steps yield to them as they yield to scheduling (gcengine's
// Config.Quiet), so a reap entry is not proposed while a job registration,
// a plan or a client update is on its way into the log: one that arrives
// behind a reap entry waits for it to apply.
type writeQuiet struct {
	mu       sync.Mutex
	inflight int
	since    time.Time
}

func newWriteQuiet() *writeQuiet { return &writeQuiet{since: time.Now()} }

// begin records a write going in; the returned func records it done.
func (q *writeQuiet) begin() func() {
	q.mu.Lock()
	q.inflight++
	q.mu.Unlock()
	return func() {
		q.mu.Lock()
		q.inflight--
		if q.inflight == 0 {
			q.since = time.Now()
		}
		q.mu.Unlock()
	}
}

// idle reports whether no write is in flight, and since when.
func (q *writeQuiet) idle() (bool, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inflight == 0, q.since
}

// bothIdle combines two idle reports: idle when both are, since the later
// of the two.
func bothIdle(a, b func() (bool, time.Time)) func() (bool, time.Time) {
	return func() (bool, time.Time) {
		ia, sa := a()
		ib, sb := b()
		if sb.After(sa) {
			sa = sb
		}
		return ia && ib, sa
	}
}

// quiet is what GC steps wait on: no eval ready or in flight in the
// broker, and no other Raft write in flight.
func (c collector) quiet() func() (bool, time.Time) {
	return bothIdle(c.s.broker.Idle, c.s.writes.idle)
}

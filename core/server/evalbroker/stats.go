package evalbroker

// Stats is a point-in-time count of the broker's evals.
type Stats struct {
	// TotalReady counts evals ready for delivery, FailedQueue excluded.
	TotalReady int
	// TotalUnacked counts delivered evals awaiting Ack or Nack.
	TotalUnacked int
	// TotalBlocked counts evals waiting for their job's outstanding eval.
	TotalBlocked int
	// TotalWaiting counts evals held back by time: a nack delay, Eval.Wait
	// or a future Eval.WaitUntil.
	TotalWaiting int
	// TotalDelayed is the part of TotalWaiting held until Eval.WaitUntil.
	TotalDelayed int
	// TotalFailed counts evals ready in FailedQueue.
	TotalFailed int
	// TotalCancelable counts superseded evals not yet drained by Cancelable.
	TotalCancelable int
	// DequeueWaiters counts Dequeue callers blocked for want of work.
	DequeueWaiters int
	// ByType counts ready and unacked evals per queue (eval type, or
	// FailedQueue).
	ByType map[string]TypeStats
}

// TypeStats counts one queue's evals.
type TypeStats struct {
	Ready   int
	Unacked int
}

// Stats returns the current counts.
func (b *Broker) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Stats{ByType: make(map[string]TypeStats), TotalCancelable: len(b.cancelable), DequeueWaiters: b.waiters}
	for _, e := range b.evals {
		switch e.state {
		case stateReady:
			ts := s.ByType[e.queue]
			ts.Ready++
			s.ByType[e.queue] = ts
			if e.queue == FailedQueue {
				s.TotalFailed++
			} else {
				s.TotalReady++
			}
		case stateUnacked:
			ts := s.ByType[e.queue]
			ts.Unacked++
			s.ByType[e.queue] = ts
			s.TotalUnacked++
		case statePending:
			s.TotalBlocked++
		case stateWaiting:
			s.TotalWaiting++
		case stateDelayed:
			s.TotalWaiting++
			s.TotalDelayed++
		}
	}
	return s
}

package evalbroker

import "container/heap"

// SetPaused pauses or resumes deliveries (the scheduler configuration's
// PauseEvalBroker). While paused the broker keeps accepting evals and
// running its timers, but Dequeue hands nothing out: evals stay queued
// until the pause ends, and evals already delivered finish normally. The
// pause outlives SetEnabled; the leader sets it from the stored
// configuration when it steps up.
func (b *Broker) SetPaused(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.paused == on {
		return
	}
	b.paused = on
	if !on {
		b.broadcastLocked() // waiting workers look again
	}
	b.logger.Info("eval broker deliveries", "paused", on)
}

// Paused reports whether deliveries are paused.
func (b *Broker) Paused() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.paused
}

// Drop forgets the evals of ids that the broker holds and no worker has
// (the evals were deleted from state), also from the superseded evals
// waiting to be canceled. An eval delivered and not yet acked
// is kept, and its ID returned. A dropped eval's job slot passes to the
// job's pending eval. IDs the broker does not hold are ignored.
func (b *Broker) Drop(ids []string) (outstanding []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		e, ok := b.evals[id]
		if !ok {
			continue
		}
		switch e.state {
		case stateUnacked:
			outstanding = append(outstanding, id)
			continue
		case stateReady:
			if h := b.ready[e.queue]; h != nil {
				for i, x := range *h {
					if x == e {
						heap.Remove(h, i)
						break
					}
				}
			}
		case statePending:
			if k := keyOf(e.eval); b.pending[k] == e {
				delete(b.pending, k)
			}
		case stateWaiting, stateDelayed:
			b.disarmLocked(e)
		}
		b.forgetLocked(e)
		b.releaseJobLocked(e)
	}
	// A superseded eval waiting to be canceled must not be written again.
	gone := make(map[string]bool, len(ids))
	for _, id := range ids {
		gone[id] = true
	}
	for _, id := range outstanding {
		delete(gone, id)
	}
	kept := b.cancelable[:0]
	for _, ev := range b.cancelable {
		if !gone[ev.ID] {
			kept = append(kept, ev)
		}
	}
	b.cancelable = kept
	return outstanding
}

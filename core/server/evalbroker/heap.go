package evalbroker

// readyHeap orders one queue's deliverable evals: higher Priority first, then
// lower CreateIndex (older first), then admission order. Dequeue compares the
// heads of several queues with the same rule.
type readyHeap []*entry

func readyBefore(a, b *entry) bool {
	if a.eval.Priority != b.eval.Priority {
		return a.eval.Priority > b.eval.Priority
	}
	if a.eval.CreateIndex != b.eval.CreateIndex {
		return a.eval.CreateIndex < b.eval.CreateIndex
	}
	return a.seq < b.seq
}

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return readyBefore(h[i], h[j]) }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(*entry)) }
func (h *readyHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return e
}

// timerHeap orders armed entries by deadline. Each entry is armed at most
// once (timerIdx tracks its slot), so re-arming or disarming never leaves a
// stale deadline behind for the timer loop to skip.
type timerHeap []*entry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].timerIdx = i
	h[j].timerIdx = j
}
func (h *timerHeap) Push(x any) {
	e := x.(*entry)
	e.timerIdx = len(*h)
	*h = append(*h, e)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.timerIdx = -1
	*h = old[:n-1]
	return e
}

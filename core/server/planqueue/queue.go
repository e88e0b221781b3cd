// Package planqueue is the leader's queue of plans submitted by scheduler
// workers, waiting for the single plan applier to check and commit them.
//
// A worker enqueues its plan and waits on the returned Future; the applier
// dequeues plans one at a time, highest priority first and FIFO within a
// priority, and responds to each. The queue exists only on the leader:
// disabling it (step-down) fails every queued plan with ErrFlushed so their
// workers stop waiting.
package planqueue

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Errors the callers act on.
var (
	// ErrNotEnabled: the queue is disabled (this server is not the leader).
	ErrNotEnabled = errors.New("plan queue is disabled")
	// ErrFlushed: the queue was disabled while the plan waited in it.
	ErrFlushed = errors.New("plan queue flushed")
	// ErrNilPlan: Enqueue was given no plan.
	ErrNilPlan = errors.New("nil plan")
)

// Future is a submitted plan's outcome.
type Future interface {
	// Wait blocks until the plan is responded to or ctx ends. Giving up
	// on the wait does not withdraw the plan.
	Wait(ctx context.Context) (*structs.PlanResult, error)
}

// Pending is a queued plan as the applier sees it. It is also the Future
// handed to the submitter.
type Pending struct {
	Plan        *structs.Plan
	EnqueueTime time.Time

	seq  uint64
	once sync.Once
	done chan struct{}
	res  *structs.PlanResult
	err  error
}

var _ Future = (*Pending)(nil)

// Respond delivers the applier's verdict to the submitter. Only the first
// call counts, so a flush racing with the applier cannot overwrite a result.
func (p *Pending) Respond(r *structs.PlanResult, err error) {
	p.once.Do(func() {
		p.res, p.err = r, err
		close(p.done)
	})
}

// Wait implements Future.
func (p *Pending) Wait(ctx context.Context) (*structs.PlanResult, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pendingHeap: higher Plan.Priority first, then enqueue order.
type pendingHeap []*Pending

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	if h[i].Plan.Priority != h[j].Plan.Priority {
		return h[i].Plan.Priority > h[j].Plan.Priority
	}
	return h[i].seq < h[j].seq
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(*Pending)) }
func (h *pendingHeap) Pop() any {
	old := *h
	n := len(old)
	p := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return p
}

// Queue is the plan queue. All methods are safe for concurrent use.
type Queue struct {
	mu      sync.Mutex
	enabled bool
	epoch   uint64        // bumped on every disable; Dequeue callers of an old epoch fail
	readyCh chan struct{} // closed (and replaced) on enqueue and on disable
	waiters int
	seq     uint64
	heap    pendingHeap
}

// New returns a disabled queue.
func New() *Queue {
	return &Queue{readyCh: make(chan struct{})}
}

// SetEnabled turns the queue on or off. Turning it off responds ErrFlushed
// to every queued plan and wakes Dequeue callers with ErrNotEnabled.
func (q *Queue) SetEnabled(on bool) {
	q.mu.Lock()
	if q.enabled == on {
		q.mu.Unlock()
		return
	}
	q.enabled = on
	var flushed pendingHeap
	if !on {
		flushed = q.heap
		q.heap = nil
		q.epoch++
		q.broadcastLocked()
	}
	q.mu.Unlock()
	for _, p := range flushed {
		p.Respond(nil, ErrFlushed)
	}
}

// Enabled reports whether the queue accepts plans.
func (q *Queue) Enabled() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.enabled
}

func (q *Queue) broadcastLocked() {
	close(q.readyCh)
	q.readyCh = make(chan struct{})
}

// Enqueue queues a plan and returns the Future of its result.
func (q *Queue) Enqueue(p *structs.Plan) (Future, error) {
	if p == nil {
		return nil, ErrNilPlan
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.enabled {
		return nil, ErrNotEnabled
	}
	q.seq++
	pend := &Pending{Plan: p, EnqueueTime: time.Now(), seq: q.seq, done: make(chan struct{})}
	heap.Push(&q.heap, pend)
	q.broadcastLocked()
	return pend, nil
}

// Dequeue blocks until a plan is queued and returns it: the highest
// priority first, then the oldest. It returns ctx.Err() when ctx ends and
// ErrNotEnabled when the queue is or becomes disabled. The caller must
// Respond to the returned plan.
func (q *Queue) Dequeue(ctx context.Context) (*Pending, error) {
	q.mu.Lock()
	if !q.enabled {
		q.mu.Unlock()
		return nil, ErrNotEnabled
	}
	epoch := q.epoch
	for {
		if err := ctx.Err(); err != nil {
			q.mu.Unlock()
			return nil, err
		}
		if !q.enabled || q.epoch != epoch {
			q.mu.Unlock()
			return nil, ErrNotEnabled
		}
		if len(q.heap) > 0 {
			p := heap.Pop(&q.heap).(*Pending)
			q.mu.Unlock()
			return p, nil
		}
		wake := q.readyCh
		q.waiters++
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-wake:
		}
		q.mu.Lock()
		q.waiters--
	}
}

// Stats is a point-in-time view of the queue.
type Stats struct {
	// Depth counts queued plans.
	Depth int
	// DequeueWaiters counts Dequeue callers blocked for want of plans.
	DequeueWaiters int
}

// Stats returns the current counts.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return Stats{Depth: len(q.heap), DequeueWaiters: q.waiters}
}

package client

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

const (
	// defaultBatchInterval is how long non-terminal alloc updates are
	// coalesced before they are sent: a starting alloc changes its task
	// states several times in quick succession, and one write through Raft
	// for all of them is enough.
	defaultBatchInterval = 200 * time.Millisecond

	// finalFlushTimeout bounds the last send at shutdown.
	finalFlushTimeout = 2 * time.Second
)

// updateBatcher sends alloc updates to the server. Updates of one alloc
// supersede each other (the last one wins), non-terminal ones are coalesced
// for up to the batch interval, and a terminal update (complete, failed,
// lost) flushes everything pending at once: the scheduler waits on it to
// reuse the alloc's resources or to move a job along.
//
// A failed send keeps its updates, unless newer ones replaced them, and is
// retried with backoff.
type updateBatcher struct {
	send     func(ctx context.Context, allocs []*structs.Allocation) error
	interval time.Duration
	backoff  backoff
	logger   hclog.Logger
	// after is time.After; tests replace it to fire the batch timer
	// themselves.
	after func(time.Duration) <-chan time.Time

	mu      sync.Mutex
	pending map[string]*structs.Allocation
	urgent  bool

	kick chan struct{}
}

func newUpdateBatcher(send func(context.Context, []*structs.Allocation) error, interval time.Duration, logger hclog.Logger) *updateBatcher {
	if interval <= 0 {
		interval = defaultBatchInterval
	}
	return &updateBatcher{
		send:     send,
		interval: interval,
		backoff:  backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second},
		logger:   logger,
		after:    time.After,
		pending:  make(map[string]*structs.Allocation),
		kick:     make(chan struct{}, 1),
	}
}

// Enqueue queues an update; the batcher keeps a's pointer, so the caller
// must hand over a copy it no longer touches.
func (b *updateBatcher) Enqueue(a *structs.Allocation) {
	b.mu.Lock()
	b.pending[a.ID] = a
	if isTerminalClientStatus(a.ClientStatus) {
		b.urgent = true
	}
	b.mu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// run sends batches until ctx ends, then makes one last bounded attempt to
// deliver what is pending, so a clean shutdown does not lose a final status.
func (b *updateBatcher) run(ctx context.Context) {
	failures := 0
	for {
		select {
		case <-ctx.Done():
			b.finalFlush()
			return
		case <-b.kick:
		}
		if !b.isUrgent() {
			if !b.waitInterval(ctx) {
				b.finalFlush()
				return
			}
		}
		if err := b.flush(ctx); err != nil {
			failures++
			wait := b.backoff.next(failures)
			b.logger.Warn("failed to send alloc updates; retrying", "error", err, "retry_in", wait)
			select {
			case <-ctx.Done():
				b.finalFlush()
				return
			case <-time.After(wait):
			}
			b.rekick()
			continue
		}
		failures = 0
	}
}

// waitInterval waits out the coalescing window, cut short by a terminal
// update. It reports false when ctx ended.
func (b *updateBatcher) waitInterval(ctx context.Context) bool {
	timer := b.after(b.interval)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer:
			return true
		case <-b.kick:
			if b.isUrgent() {
				return true
			}
		}
	}
}

func (b *updateBatcher) isUrgent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.urgent
}

func (b *updateBatcher) rekick() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// flush sends everything pending as one batch. On failure the updates go
// back to pending unless a newer update of the same alloc arrived meanwhile.
func (b *updateBatcher) flush(ctx context.Context) error {
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.urgent = false
		b.mu.Unlock()
		return nil
	}
	batch := make([]*structs.Allocation, 0, len(b.pending))
	for _, a := range b.pending {
		batch = append(batch, a)
	}
	urgent := b.urgent
	b.pending = make(map[string]*structs.Allocation)
	b.urgent = false
	b.mu.Unlock()

	err := b.send(ctx, batch)
	if err == nil {
		return nil
	}
	b.mu.Lock()
	for _, a := range batch {
		if _, newer := b.pending[a.ID]; !newer {
			b.pending[a.ID] = a
		}
	}
	b.urgent = b.urgent || urgent
	b.mu.Unlock()
	return err
}

func (b *updateBatcher) finalFlush() {
	ctx, cancel := context.WithTimeout(context.Background(), finalFlushTimeout)
	defer cancel()
	if err := b.flush(ctx); err != nil {
		b.logger.Warn("alloc updates not delivered at shutdown", "error", err)
	}
}

// backoff computes capped exponential retry delays.
type backoff struct {
	Base, Max time.Duration
}

// next returns the delay before retry number n (1-based).
func (b backoff) next(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	return d
}

package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// DefaultBufferSize is the number of Raft entries' batches a server keeps.
const DefaultBufferSize = 1024

// DefaultMaxSubscribers bounds the subscriptions of one server.
const DefaultMaxSubscribers = 512

// DefaultMaxEvents bounds the events the ring holds across its batches: a
// placement of a large system job is one entry with thousands of events,
// and a ring of such batches must not hold gigabytes. Past it the oldest
// batches are dropped (the newest is always kept).
const DefaultMaxEvents = 64 * 1024

// ErrSubscriberLagged ends a subscription that fell a whole ring behind
// the publisher: the events it had not read were overwritten. It resumes
// by subscribing again from the last index it saw.
var ErrSubscriberLagged = errors.New("subscription closed by server, client is too slow: events it had not read were dropped from the buffer")

// ErrTooManySubscribers refuses a subscription beyond the bound.
var ErrTooManySubscribers = errors.New("too many event stream subscribers")

// ErrClosed ends subscriptions when the buffer is closed (agent stop).
var ErrClosed = errors.New("event stream closed: server stopping")

// Buffer is the ring of the last batches published. Publish never blocks
// on readers: each subscription keeps its own position and reads the ring
// under the lock; the publisher only overwrites the oldest slot and wakes
// waiters by closing a channel.
type Buffer struct {
	mu   sync.Mutex
	ring []*Batch
	// next is the sequence number the next batch gets; batch seq lives in
	// ring[seq%len(ring)], and the ring holds seqs [oldestSeq(), next).
	next uint64
	// first is the oldest seq not evicted for the event bound.
	first uint64
	// events counts the events of the batches held; maxEvents bounds it.
	events    int
	maxEvents int
	// wake is closed (and replaced) on every publish and on Close.
	wake   chan struct{}
	closed bool

	subs    int
	maxSubs int

	// dropped counts subscriptions ended by ErrSubscriberLagged.
	dropped uint64
	// published counts events published.
	published uint64
}

// NewBuffer returns a ring of size batches (DefaultBufferSize if <= 0)
// serving at most maxSubs subscriptions (DefaultMaxSubscribers if <= 0).
func NewBuffer(size, maxSubs int) *Buffer {
	if size <= 0 {
		size = DefaultBufferSize
	}
	if maxSubs <= 0 {
		maxSubs = DefaultMaxSubscribers
	}
	return &Buffer{ring: make([]*Batch, size), wake: make(chan struct{}), maxSubs: maxSubs, maxEvents: DefaultMaxEvents}
}

// Publish appends the events of the entry at index. Empty batches are
// skipped. It is called by the FSM in commit order and never waits.
func (b *Buffer) Publish(index uint64, evs []*Event) {
	if b == nil || len(evs) == 0 {
		return
	}
	batch := newBatch(index, evs)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	slot := b.next % uint64(len(b.ring))
	if old := b.ring[slot]; old != nil && b.next-uint64(len(b.ring)) >= b.first {
		b.events -= len(old.Events)
	}
	b.ring[slot] = batch
	b.next++
	b.events += len(evs)
	b.published += uint64(len(evs))
	for b.events > b.maxEvents && b.oldestSeq() < b.next-1 {
		seq := b.oldestSeq()
		b.events -= len(b.ring[seq%uint64(len(b.ring))].Events)
		b.ring[seq%uint64(len(b.ring))] = nil
		b.first = seq + 1
	}
	wake := b.wake
	b.wake = make(chan struct{})
	b.mu.Unlock()
	close(wake)
}

// SetMaxEvents changes the event bound (DefaultMaxEvents); call it before
// publishing.
func (b *Buffer) SetMaxEvents(n int) {
	b.mu.Lock()
	b.maxEvents = n
	b.mu.Unlock()
}

// Close ends every subscription with ErrClosed.
func (b *Buffer) Close() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	close(b.wake)
}

// Stats is a snapshot of the buffer's counters.
type Stats struct {
	Subscribers int
	Published   uint64
	Dropped     uint64
	OldestIndex uint64
	LatestIndex uint64
}

// Stats reports the buffer's counters.
func (b *Buffer) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Stats{Subscribers: b.subs, Published: b.published, Dropped: b.dropped}
	if b.next > 0 {
		st.OldestIndex = b.ring[b.oldestSeq()%uint64(len(b.ring))].Index
		st.LatestIndex = b.ring[(b.next-1)%uint64(len(b.ring))].Index
	}
	return st
}

func (b *Buffer) oldestSeq() uint64 {
	if n := uint64(len(b.ring)); b.next > n && b.next-n > b.first {
		return b.next - n
	}
	return b.first
}

// Subscription reads batches from a Buffer in order. It is owned by one
// goroutine; Close releases its slot.
type Subscription struct {
	b      *Buffer
	seq    uint64
	filter *Filter
	once   sync.Once
	// ahead holds batches taken from the ring; those from pos on are not
	// returned yet.
	ahead []*Batch
	pos   int
	// Truncated is set when the index asked for was no longer in the
	// buffer: the subscription starts at the oldest batch kept
	// (StartIndex), and events in between were missed.
	Truncated  bool
	StartIndex uint64
}

// Subscribe starts a subscription at the first batch whose index is at
// least index (index 0: the oldest batch kept, the server's backlog, as
// Nomad). An index older than the buffer starts at the oldest batch and
// sets Truncated. filter may be nil (everything).
func (b *Buffer) Subscribe(index uint64, filter *Filter) (*Subscription, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	if b.subs >= b.maxSubs {
		return nil, fmt.Errorf("%w (at most %d)", ErrTooManySubscribers, b.maxSubs)
	}
	b.subs++
	s := &Subscription{b: b, filter: filter}
	oldest := b.oldestSeq()
	s.seq = b.next
	for seq := oldest; seq < b.next; seq++ {
		if b.ring[seq%uint64(len(b.ring))].Index >= index {
			s.seq = seq
			break
		}
	}
	if b.next > oldest {
		oldestIdx := b.ring[oldest%uint64(len(b.ring))].Index
		// Only a ring that dropped batches has lost any: until then it
		// holds everything this server published.
		if index > 0 && index < oldestIdx && oldest > 0 {
			s.Truncated = true
		}
		if s.seq < b.next {
			s.StartIndex = b.ring[s.seq%uint64(len(b.ring))].Index
		}
	}
	return s, nil
}

// Close releases the subscription's slot; it is idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.b.mu.Lock()
		s.b.subs--
		s.b.mu.Unlock()
	})
}

// readAhead is how many batches a subscription takes from the ring per
// lock: readers then contend with the publisher once per readAhead batches.
const readAhead = 64

// Next returns the next batch with events that pass the filter (only
// those events), waiting until one is published or ctx ends. It returns
// ErrSubscriberLagged when the publisher overwrote batches this
// subscription had not read, and ErrClosed after Buffer.Close.
func (s *Subscription) Next(ctx context.Context) (*Batch, error) {
	for {
		for s.pos < len(s.ahead) {
			batch := s.ahead[s.pos]
			s.ahead[s.pos] = nil
			s.pos++
			if out := s.filter.Apply(batch); out != nil {
				return out, nil
			}
		}
		if err := s.fill(ctx); err != nil {
			return nil, err
		}
	}
}

// fill takes up to readAhead unread batches from the ring, waiting for one
// if there is none.
func (s *Subscription) fill(ctx context.Context) error {
	b := s.b
	for {
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return ErrClosed
		}
		if s.seq < b.oldestSeq() {
			b.dropped++
			b.mu.Unlock()
			return ErrSubscriberLagged
		}
		if s.seq < b.next {
			if s.ahead == nil {
				s.ahead = make([]*Batch, 0, readAhead)
			}
			s.ahead, s.pos = s.ahead[:0], 0
			for ; s.seq < b.next && len(s.ahead) < readAhead; s.seq++ {
				s.ahead = append(s.ahead, b.ring[s.seq%uint64(len(b.ring))])
			}
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

package fsm

import (
	"sync"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/state"
)

// eventFeed derives each applied entry's events from the changes its
// writes committed and publishes them, with the entry's index, to the
// event buffer. The state store reports the changes (state.ChangeSink);
// the feed keeps those of the entry being applied and publishes them when
// the entry is done, so that an entry's events form one batch.
type eventFeed struct {
	buf *events.Buffer
	// mu guards pending: the apply goroutine is the only writer in a
	// server, but tests write to the store from their own goroutines.
	mu      sync.Mutex
	pending memdb.Changes
	// pendingIndex is the index of the changes in pending.
	pendingIndex uint64
}

// SetEventBuffer makes the FSM publish every applied entry's events to
// buf. Call it before Raft starts; without it no changes are tracked.
func (f *FSM) SetEventBuffer(buf *events.Buffer) {
	f.stream.buf = buf
	f.stream.attach(f.State())
}

// attach makes st report its changes to the feed, if the feed is on.
func (e *eventFeed) attach(st *state.StateStore) {
	if e.buf != nil {
		st.SetChangeSink(e.collect)
	}
}

// collect is the state store's change sink.
func (e *eventFeed) collect(index uint64, ch memdb.Changes) {
	e.mu.Lock()
	if index != e.pendingIndex {
		// Changes of an earlier index were never published (a write
		// outside Apply): they are not this entry's.
		e.pending = e.pending[:0]
		e.pendingIndex = index
	}
	e.pending = append(e.pending, ch...)
	e.mu.Unlock()
}

// publish hands the entry's events to the buffer. The buffer never
// blocks, so the apply loop never waits on a subscriber.
func (e *eventFeed) publish(l *raft.Log) {
	if e.buf == nil {
		return
	}
	e.mu.Lock()
	var ch memdb.Changes
	if e.pendingIndex == l.Index {
		ch = e.pending
	}
	e.pending = nil
	e.pendingIndex = 0
	e.mu.Unlock()
	if len(ch) == 0 {
		return
	}
	t, ok := entryType(l.Data)
	if !ok {
		return
	}
	e.buf.Publish(l.Index, events.FromChanges(t, ch))
}

// Apply applies one committed entry (see applyEntry) and publishes its
// events.
func (f *FSM) Apply(l *raft.Log) any {
	resp := f.applyEntry(l)
	f.stream.publish(l)
	return resp
}

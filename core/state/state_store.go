// Package state is drover's replicated state: an in-memory go-memdb database
// written only by the Raft FSM (and by tests), read by every RPC, HTTP
// handler and scheduler worker.
//
// Ownership: objects handed out by readers are shared with the store and with
// every other reader; callers treat them as immutable and copy before
// changing anything. Writers take ownership of the objects passed to them
// (they stamp indexes on them and store them as they are), so a caller must
// not modify an object after handing it to a writer. Writers never modify an
// object that is already stored: they store a modified copy.
//
// Blocking queries: every reader takes a memdb.WatchSet (nil to not watch)
// and adds the channels that close when what it read changes; BlockingQuery
// re-runs a read until its index passes the caller's.
package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
)

// StateStore is the state database. The zero value is not usable; use
// NewStateStore.
type StateStore struct {
	db *memdb.MemDB

	// abandonCh is closed when the FSM replaces this store with one
	// restored from a snapshot; successor then points at the replacement so
	// that a blocking query in flight continues on the new store.
	abandonCh   chan struct{}
	abandonOnce *sync.Once
	successor   *atomic.Pointer[StateStore]

	// now is the time writes through this handle stamp (see At); zero
	// when the writer gave none.
	now time.Time

	// changes, when set, is told what each committed write changed (see
	// SetChangeSink). Snapshots never have one.
	changes ChangeSink
}

// ChangeSink receives the changes of each committed write, with its Raft
// index, on the writer's goroutine right after the commit. It must not
// block and must not modify the objects.
type ChangeSink func(index uint64, changes memdb.Changes)

// SetChangeSink makes every later write through this store (and handles
// taken from it with At) report its changes to fn. Set it before the store
// is shared; the FSM sets it to derive the event stream.
func (s *StateStore) SetChangeSink(fn ChangeSink) { s.changes = fn }

// StateSnapshot is a point-in-time copy of the store. Later writes to the
// store do not show in it. It has every reader of StateStore, and its
// writers change only the snapshot: the plan applier uses that to apply a
// plan optimistically before Raft commits it.
type StateSnapshot struct {
	StateStore
}

// NewStateStore returns an empty store.
func NewStateStore() (*StateStore, error) {
	db, err := memdb.NewMemDB(schema.DB())
	if err != nil {
		return nil, fmt.Errorf("state: schema: %w", err)
	}
	return newStore(db), nil
}

func newStore(db *memdb.MemDB) *StateStore {
	return &StateStore{
		db:          db,
		abandonCh:   make(chan struct{}),
		abandonOnce: new(sync.Once),
		successor:   new(atomic.Pointer[StateStore]),
	}
}

// At returns a handle on the same store whose writes are stamped with now:
// eval create and modify times, alloc modify times, job submit times, node
// events and drain metadata. The store never reads the clock itself: every
// server applying a Raft entry must store the same times, so the FSM passes
// the time the leader put into the entry. Writes through a handle without a
// time (the zero value, or a store not obtained from At) keep the times the
// written objects carry and leave unset ones at zero.
func (s *StateStore) At(now time.Time) *StateStore {
	c := *s
	c.now = now
	return &c
}

// Snapshot returns a consistent view of the store as of now. It is cheap:
// the database is a persistent radix tree, so nothing is copied up front.
func (s *StateStore) Snapshot() (*StateSnapshot, error) {
	return &StateSnapshot{StateStore: *newStore(s.db.Snapshot())}, nil
}

// AbandonCh is closed when the store is replaced by a snapshot restore.
// Anyone holding the store past that point reads stale data and must fetch
// the current store again (BlockingQuery does so by itself).
func (s *StateStore) AbandonCh() <-chan struct{} { return s.abandonCh }

// Abandon marks the store as replaced by successor and wakes every watcher.
// The FSM calls it after a snapshot restore; successor may be nil.
func (s *StateStore) Abandon(successor *StateStore) {
	s.abandonOnce.Do(func() {
		if successor != nil {
			s.successor.Store(successor)
		}
		close(s.abandonCh)
	})
}

// Index returns the Raft index of the last write to table, or 0.
func (s *StateStore) Index(table string) uint64 {
	txn := s.db.Txn(false)
	raw, err := txn.First(TableIndex, "id", table)
	if err != nil || raw == nil {
		return 0
	}
	return raw.(*IndexEntry).Value
}

// LatestIndex returns the highest Raft index applied to any table.
func (s *StateStore) LatestIndex() uint64 {
	txn := s.db.Txn(false)
	iter, err := txn.Get(TableIndex, "id")
	if err != nil {
		return 0
	}
	var max uint64
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		if v := raw.(*IndexEntry).Value; v > max {
			max = v
		}
	}
	return max
}

// BlockingQuery runs fn and returns the index it reports once that index
// exceeds minIndex. While it does not, BlockingQuery waits until something fn
// read changes (fn adds the channels to ws), the store is replaced by a
// snapshot restore (fn then re-runs on the new store), or ctx ends. A
// minIndex of 0 never blocks.
//
// When ctx's deadline passes, BlockingQuery returns fn's last index with a
// nil error: an idle blocking query answers with the unchanged result. When
// ctx is cancelled it returns ctx's error. An error from fn ends the query.
func (s *StateStore) BlockingQuery(ctx context.Context, minIndex uint64, fn func(ws memdb.WatchSet, s *StateStore) (uint64, error)) (uint64, error) {
	store := s
	for {
		ws := memdb.NewWatchSet()
		ws.Add(store.abandonCh)
		index, err := fn(ws, store)
		if err != nil || minIndex == 0 || index > minIndex {
			return index, err
		}
		if werr := ws.WatchCtx(ctx); werr != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return index, nil
			}
			return index, ctx.Err()
		}
		select {
		case <-store.abandonCh:
			next := store.successor.Load()
			if next == nil {
				// Abandoned without a replacement: nothing will ever
				// change here again, so answer with what we have.
				return index, nil
			}
			store = next
		default:
		}
	}
}

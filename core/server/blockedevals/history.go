package blockedevals

import "sort"

// History sizes: a class or node unblocked more recently than this many
// other keys is remembered exactly; older ones only through the floor.
const (
	classHistoryLimit = 1024
	nodeHistoryLimit  = 16384
)

// indexHistory remembers, per key (a computed class or a node ID), the
// latest Raft index at which it was unblocked. Block uses it to catch the
// race where an unblock at index N lands while a worker is still scheduling
// from a snapshot older than N: the eval it then blocks would otherwise wait
// for a capacity change that already happened.
//
// The history is bounded by count rather than by time, so it needs no
// goroutine and no clock. Forgetting is conservative: floor is the highest
// index ever forgotten, and any eval whose snapshot predates it is treated
// as having missed an unblock. That costs a spurious reschedule at worst,
// never a lost one.
type indexHistory struct {
	latest map[string]uint64
	floor  uint64 // highest forgotten index
	max    uint64 // highest index recorded, forgotten or not
	limit  int
}

func newIndexHistory(limit int) indexHistory {
	return indexHistory{latest: make(map[string]uint64), limit: limit}
}

func (h *indexHistory) record(key string, index uint64) {
	if index > h.latest[key] {
		h.latest[key] = index
	}
	if index > h.max {
		h.max = index
	}
	if len(h.latest) > h.limit {
		h.prune()
	}
}

// prune forgets the oldest half of the keys.
func (h *indexHistory) prune() {
	type kv struct {
		key   string
		index uint64
	}
	all := make([]kv, 0, len(h.latest))
	for k, v := range h.latest {
		all = append(all, kv{k, v})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].index < all[j].index })
	for _, e := range all[:len(all)-h.limit/2] {
		delete(h.latest, e.key)
		if e.index > h.floor {
			h.floor = e.index
		}
	}
}

// after reports whether key may have been unblocked after index.
func (h *indexHistory) after(key string, index uint64) bool {
	return h.latest[key] > index || h.floor > index
}

// anyAfter reports whether any key was unblocked after index.
func (h *indexHistory) anyAfter(index uint64) bool { return h.max > index }

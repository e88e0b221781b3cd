package csivolumes

import (
	"hash/fnv"
	"sync"
)

// claimLocks serializes claims and releases of one volume on the leader,
// so a claim's check and its write see no other claim in between. Striped:
// bounded whatever the number of volumes.
type claimLocks [64]sync.Mutex

func (l *claimLocks) lock(ns, id string) func() {
	m := &l[l.stripe(ns, id)]
	m.Lock()
	return m.Unlock
}

func (l *claimLocks) stripe(ns, id string) int {
	h := fnv.New32a()
	h.Write([]byte(ns))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(len(l)))
}

// lockAll locks the stripes of several volumes, each once and in stripe
// order, so two callers locking overlapping sets cannot deadlock, and
// returns the unlock. Nothing holding a stripe takes another but through
// lockAll.
func (l *claimLocks) lockAll(keys [][2]string) func() {
	var held [len(claimLocks{})]bool
	for _, k := range keys {
		held[l.stripe(k[0], k[1])] = true
	}
	for i := range held {
		if held[i] {
			l[i].Lock()
		}
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			if held[i] {
				l[i].Unlock()
			}
		}
	}
}

// LockStripes is the number of claim lock stripes: however many volumes,
// at most this many claims run at once.
const LockStripes = len(claimLocks{})

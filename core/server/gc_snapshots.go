package server

// While a GC job runs, the leader takes no Raft snapshot for the entries it
// writes: a backlog of a million objects is some 40,000 small reap entries,
// which would make Raft snapshot the whole state (gigabytes to encode, and
// as much garbage for Go's collector) two or three times while the backlog
// drains and placements wait behind the CPU it takes. Deferred, the next
// snapshot comes after the run, of a state the run made smaller. The
// deferral is bounded: past gcSnapshotThreshold entries since the last
// snapshot Raft snapshots anyway, so the log stays bounded too (reap
// entries hold references only, some tens of bytes an object).

// gcSnapshotThreshold is Raft's SnapshotThreshold while a GC job runs.
const gcSnapshotThreshold = 1 << 17

// deferSnapshots raises the Raft snapshot threshold to gcSnapshotThreshold
// (when it is lower) and returns the function that puts it back.
func (c collector) deferSnapshots() (restore func()) {
	s := c.s
	if s.raft == nil {
		return func() {}
	}
	rc := s.raft.ReloadableConfig()
	if rc.SnapshotThreshold >= gcSnapshotThreshold {
		return func() {}
	}
	raised := rc
	raised.SnapshotThreshold = gcSnapshotThreshold
	if err := s.raft.ReloadConfig(raised); err != nil {
		s.logger.Warn("garbage collection could not defer Raft snapshots", "error", err)
		return func() {}
	}
	return func() {
		cur := s.raft.ReloadableConfig()
		cur.SnapshotThreshold = rc.SnapshotThreshold
		if err := s.raft.ReloadConfig(cur); err != nil {
			s.logger.Warn("garbage collection could not restore the Raft snapshot threshold", "threshold", rc.SnapshotThreshold, "error", err)
		}
	}
}

package server

import (
	"time"

	"github.com/drover-org/drover/core/structs"
)

// ApplyUnchecked proposes an encoded Raft entry as it is, skipping the
// check every other write makes (fsm.CheckEntry). It exists so that tests
// outside this package can put into the log what an older version or a
// corrupt log would hold, and see a server meet an entry it cannot apply:
// nothing else may call it, since such an entry stops every server on
// every restart. It returns the entry's index once committed; the entry's
// own response (the FSM's stop error) is not an error here.
func (s *Server) ApplyUnchecked(buf []byte, timeout time.Duration) (uint64, error) {
	if !s.IsLeader() {
		return 0, structs.NewError(structs.ErrNoLeader, "not the leader")
	}
	f := s.raft.Apply(buf, timeout)
	if err := f.Error(); err != nil {
		return 0, err
	}
	return f.Index(), nil
}

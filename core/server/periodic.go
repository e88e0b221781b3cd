package server

import (
	"github.com/drover-org/drover/core/server/periodic"
	"github.com/drover-org/drover/core/structs"
)

// newPeriodicDispatcher wires the periodic dispatcher to this server's
// state, Raft log, eval constructor and clock.
func (s *Server) newPeriodicDispatcher() *periodic.Dispatcher {
	return periodic.New(periodic.Config{
		State: func() periodic.State { return s.State() },
		Register: func(child *structs.Job) (*structs.Evaluation, uint64, error) {
			ev := s.newEval(child, structs.EvalTriggerPeriodicJob)
			index, err := s.raftApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{
				Job: child, Eval: ev, Namespace: child.Namespace, JobID: child.ID, RequireNamespace: true,
			})
			if err != nil {
				return nil, 0, err
			}
			return ev, index, nil
		},
		Now:    s.cfg.Now,
		Logger: s.logger,
	})
}

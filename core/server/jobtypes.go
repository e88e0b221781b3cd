package server

import "github.com/drover-org/drover/core/structs"

// JobTypeBehavior returns what the scheduler plugin serving jobType
// declares about it (the declaration prepareJob stamps into a registered
// job), a copy the caller owns, and whether any loaded plugin serves
// jobType. The HTTP API parses job files with it, so a parsed job gets the
// same type defaults as a registered one.
func (s *Server) JobTypeBehavior(jobType string) (*structs.JobTypeBehavior, bool) {
	b, ok := s.cfg.Schedulers.JobType(jobType)
	if !ok {
		return nil, false
	}
	return b.Copy(), true
}

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

// allocBehavior is the declaration of the alloc's job type as its job
// version was registered with; the zero behaviour without one.
func allocBehavior(a *structs.Allocation) structs.JobTypeBehavior {
	if a.Job == nil || a.Job.TypeBehavior == nil {
		return structs.JobTypeBehavior{}
	}
	return *a.Job.TypeBehavior
}

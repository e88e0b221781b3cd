package httpapi

import (
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// errJobRegistrationDisabled is Nomad's refusal of a register, dispatch or
// scale while the scheduler configuration sets RejectJobRegistration.
var errJobRegistrationDisabled = structs.NewError(structs.ErrPermissionDenied,
	"Job registration, dispatch, and scale are disabled by the scheduler configuration")

// checkJobRegistration refuses a job register, dispatch or scale (403)
// while the scheduler configuration's RejectJobRegistration is set, as
// Nomad: only a management token passes, and with ACLs off no caller
// does. It reads this agent's state (a follower's may lag the leader's
// by a moment), before anything is forwarded or written.
func (s *HTTPServer) checkJobRegistration(r *http.Request) error {
	if a := requestACL(r); a != nil && a.IsManagement() || s.srv == nil {
		return nil // no state here: the server the request reaches checks
	}
	_, cfg, err := s.srv.State().SchedulerConfig()
	if err != nil {
		return err
	}
	if cfg != nil && cfg.RejectJobRegistration {
		return errJobRegistrationDisabled
	}
	return nil
}

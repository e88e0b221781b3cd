package httpapi

import (
	"context"
	"net/http"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// JobValidator is implemented by a JobsAPI that can check a job without
// registering it (PUT /v1/validate/job); without it the route answers 501.
type JobValidator interface {
	Validate(ctx context.Context, job *structs.Job) (*structs.JobValidateResponse, error)
}

// jobValidateRequest is Nomad's JobValidateRequest.
type jobValidateRequest struct {
	Job *structs.Job
}

// validateJob is PUT/POST /v1/validate/job (`nomad job validate`): the
// job as Register would see it, with Nomad's JobValidateResponse. As in
// Nomad it needs read-job in the job's namespace; a job that fails its
// checks (its ID missing included) is a 200 naming each reason, a body
// without a job a 400.
func (s jobHandlers) validateJob(w http.ResponseWriter, r *http.Request) {
	var req jobValidateRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	// As Nomad: no job is a 400; a job without an ID is a 200 whose
	// ValidationErrors name the missing ID.
	if req.Job == nil {
		s.writeError(w, badRequest("Job must be specified"))
		return
	}
	req.Job.Namespace = namespaceOf(req.Job.Namespace, r)
	if !allowNS(r, req.Job.Namespace, acl.NamespaceCapabilityReadJob) {
		s.writeError(w, errPermissionDenied)
		return
	}
	v, ok := s.jobs.(JobValidator)
	if !ok {
		writeText(w, http.StatusNotImplemented, "this agent does not validate jobs")
		return
	}
	if err := req.Job.CheckBounds(); err != nil {
		writeJSON(w, r, http.StatusOK, &structs.JobValidateResponse{Error: err.Error(), ValidationErrors: []string{err.Error()}})
		return
	}
	s.fillNullPolicies(req.Job)
	resp, err := v.Validate(r.Context(), req.Job)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, r, http.StatusOK, resp)
}

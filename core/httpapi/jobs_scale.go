package httpapi

import (
	"net/http"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// jobScale serves PUT /v1/job/<id>/scale with Nomad's ScalingRequest.
// Target may name the job (it must be the URL's) and must name the group.
func (s jobHandlers) jobScale(w http.ResponseWriter, r *http.Request, id string) {
	var req structs.ScalingRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if j := req.Target[structs.ScalingTargetJob]; j != "" && j != id {
		s.writeError(w, badRequest("Target.Job: %q does not match the job %q of the URL", j, id))
		return
	}
	ns := namespaceOf("", r)
	if n := req.Target[structs.ScalingTargetNamespace]; n != "" && n != ns {
		s.writeError(w, badRequest("Target.Namespace: %q does not match the request's namespace %q", n, ns))
		return
	}
	if err := req.Validate(); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.checkJobRegistration(r); err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.jobs.Scale(r.Context(), ns, id, &req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// jobScaleStatus serves GET /v1/job/<id>/scale: each group's desired,
// placed and running counts and its latest scaling events. It blocks on
// the job, its allocations and its events.
func (s jobHandlers) jobScaleStatus(w http.ResponseWriter, r *http.Request, id string) {
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			job, err := st.JobByID(ws, q.Namespace, id)
			if err != nil {
				return 0, nil, err
			}
			if job == nil {
				return st.Index(state.TableJobs), notFound("job not found"), nil
			}
			allocs, err := st.AllocsByJob(ws, q.Namespace, id, false)
			if err != nil {
				return 0, nil, err
			}
			events, err := st.ScalingEventsByJob(ws, q.Namespace, id)
			if err != nil {
				return 0, nil, err
			}
			idx := max(job.ModifyIndex, st.Index(state.TableAllocs), st.Index(state.TableScalingEvents))
			return idx, structs.ScaleStatus(job, allocs, events), nil
		}
	})
}

// jobRevert serves PUT /v1/job/<id>/revert with Nomad's JobRevertRequest.
func (s jobHandlers) jobRevert(w http.ResponseWriter, r *http.Request, id string) {
	var req structs.JobRevertRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.JobID != "" && req.JobID != id {
		s.writeError(w, badRequest("JobID: %q does not match the job %q of the URL", req.JobID, id))
		return
	}
	if !s.allowRevertHostVolumes(r, namespaceOf("", r), id, req.JobVersion) {
		s.writeError(w, errPermissionDenied)
		return
	}
	resp, err := s.jobs.Revert(r.Context(), namespaceOf("", r), id, req.JobVersion, req.EnforcePriorVersion)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// SubmissionRegisterer is implemented by a JobsAPI that keeps a job's
// source with the version it registers; without it the source is
// dropped and the job registers as before.
type SubmissionRegisterer interface {
	RegisterSubmission(ctx context.Context, job *structs.Job, sub *structs.JobSubmission, enforceIndex bool, jobModifyIndex uint64) (*structs.JobRegisterResponse, error)
}

// JobOptsWriter is implemented by a JobsAPI that takes every option of
// Nomad's register and deregister requests (the eval's priority among
// them). Without it, a request that sets an option the plain methods do
// not take is refused rather than served without it.
type JobOptsWriter interface {
	RegisterOpts(ctx context.Context, job *structs.Job, opts structs.JobRegisterOptions) (*structs.JobRegisterResponse, error)
	DeregisterOpts(ctx context.Context, ns, jobID string, opts structs.JobDeregisterOptions) (*structs.JobDeregisterResponse, error)
}

// errEvalPriorityUnsupported answers an option the server cannot apply.
var errEvalPriorityUnsupported = structs.NewError(structs.ErrInvalid, "EvalPriority, PreserveCounts: this server does not take these register options")

// parseEvalPriority reads ?eval_priority= of a deregister: 0 when absent.
func parseEvalPriority(r *http.Request) (int, error) {
	v := r.URL.Query().Get("eval_priority")
	if v == "" {
		return 0, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("eval_priority: %q is not an integer", v)
	}
	return p, structs.CheckEvalPriority(p)
}

// deregisterJob deregisters a job with the request's options.
func (s jobHandlers) deregisterJob(ctx context.Context, ns, id string, opts structs.JobDeregisterOptions) (*structs.JobDeregisterResponse, error) {
	if ow, ok := s.jobs.(JobOptsWriter); ok {
		return ow.DeregisterOpts(ctx, ns, id, opts)
	}
	if opts.EvalPriority != 0 {
		return nil, errEvalPriorityUnsupported
	}
	return s.jobs.Deregister(ctx, ns, id, opts.Purge)
}

// registerJob registers the request's job, with its source when the
// request carries one and the server keeps sources.
func (s jobHandlers) registerJob(ctx context.Context, req *jobRegisterRequest) (*structs.JobRegisterResponse, error) {
	if err := structs.CheckEvalPriority(req.EvalPriority); err != nil {
		return nil, err
	}
	if ow, ok := s.jobs.(JobOptsWriter); ok {
		return ow.RegisterOpts(ctx, req.Job, structs.JobRegisterOptions{
			EnforceIndex: req.EnforceIndex, JobModifyIndex: req.JobModifyIndex, Submission: req.Submission, EvalPriority: req.EvalPriority,
			PreserveCounts: req.PreserveCounts,
		})
	}
	if req.EvalPriority != 0 || req.PreserveCounts {
		return nil, errEvalPriorityUnsupported
	}
	if sr, ok := s.jobs.(SubmissionRegisterer); ok && req.Submission != nil {
		return sr.RegisterSubmission(ctx, req.Job, req.Submission, req.EnforceIndex, req.JobModifyIndex)
	}
	return s.jobs.Register(ctx, req.Job, req.EnforceIndex, req.JobModifyIndex)
}

// jobSubmission is GET /v1/job/<id>/submission?version=N (`nomad job
// inspect`/the UI's "definition" view): the source of that version as
// submitted, read-job in the namespace. 404 when the version was
// registered without a source, its source was over the size limit, or
// the version is no longer kept; 400 for a missing or bad version.
func (s jobHandlers) jobSubmission(w http.ResponseWriter, r *http.Request, id string) {
	raw := r.URL.Query().Get("version")
	if raw == "" {
		s.writeError(w, badRequest("version: missing; the job version whose source to read is required"))
		return
	}
	version, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		s.writeError(w, badRequest("version: %q is not a job version (a non-negative integer)", raw))
		return
	}
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			if q.Namespace == state.AllNamespaces {
				return 0, nil, badRequest("a job's source is read in one namespace, not %q", q.Namespace)
			}
			idx := st.Index(state.TableJobVersions)
			sub, err := st.JobSubmission(ws, q.Namespace, id, version)
			if err != nil {
				return 0, nil, err
			}
			// A version no longer kept has no source either, even when
			// its pruning is still to come (see state.UpsertJobSubmission).
			if sub == nil {
				return idx, notFound("job source not found"), nil
			}
			if v, err := st.JobByIDAndVersion(ws, q.Namespace, id, version); err != nil {
				return 0, nil, err
			} else if v == nil {
				return idx, notFound("job source not found"), nil
			}
			return idx, sub, nil
		}
	})
}

package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/golang/snappy"
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/jobspec"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// jobHandlers serves the job routes: /v1/jobs and every /v1/job/<id> action.
// Its handlers reach the server through the embedded pointer.
type jobHandlers struct{ *HTTPServer }

// jobRegisterRequest is the body of PUT /v1/jobs and PUT /v1/job/:id. The
// other fields Nomad's client sends (PolicyOverride, …) are accepted and
// ignored.
type jobRegisterRequest struct {
	Job            *structs.Job
	EnforceIndex   bool
	JobModifyIndex uint64
	// EvalPriority is the priority of the eval the register creates (0:
	// the job's own).
	EvalPriority int
	// PreserveCounts keeps the stored count of every group the job has
	// already.
	PreserveCounts bool
	// Submission is the job's source, which Nomad's CLI sends with it.
	Submission *structs.JobSubmission
}

// jobPlanRequest is the body of PUT /v1/job/:id/plan.
type jobPlanRequest struct {
	Job  *structs.Job
	Diff bool
}

// jobParseRequest is the body of PUT /v1/jobs/parse. Variables holds
// values of the job file's input variables as HCL assignments
// (`image = "redis:7"`), the content of a var file, as Nomad's API takes
// them; the agent's environment never sets them.
type jobParseRequest struct {
	JobHCL       string
	Canonicalize bool
	Variables    string
}

// parseVariablesName is the name positions in jobParseRequest.Variables
// are given in.
const parseVariablesName = "Variables"

// jobDispatchRequest is the body of PUT /v1/job/:id/dispatch.
type jobDispatchRequest struct {
	JobID            string
	Payload          []byte
	Meta             map[string]string
	IdPrefixTemplate string
	Priority         int
}

// jobVersionsResponse is the body of GET /v1/job/:id/versions. With
// ?diffs=true, Diffs[i] is what changed from Versions[i+1] to Versions[i]
// (versions run newest first); otherwise it is null.
type jobVersionsResponse struct {
	Versions []*structs.Job
	Diffs    []*structs.JobDiff
}

func (s jobHandlers) jobList(w http.ResponseWriter, r *http.Request) {
	allow := nsFilter(r, acl.NamespaceCapabilityListJobs)
	withMeta, err := parseBool(r, "meta")
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			jobs, err := st.JobList(ws, q.Namespace, q.Prefix)
			if err != nil {
				return 0, nil, err
			}
			jobs = filterNS(jobs, func(j *structs.Job) string { return j.Namespace }, allow)
			stubs := make(jobStubs, 0, len(jobs))
			for _, j := range jobs {
				sum, err := st.JobSummaryByID(ws, j.Namespace, j.ID)
				if err != nil {
					return 0, nil, err
				}
				stubs = append(stubs, j.Stub(sum, withMeta))
			}
			sort.SliceStable(stubs, func(a, b int) bool {
				if stubs[a].ID != stubs[b].ID {
					return stubs[a].ID < stubs[b].ID
				}
				return stubs[a].Namespace < stubs[b].Namespace
			})
			return max(st.Index(state.TableJobs), st.Index(state.TableJobSummary)), stubs, nil
		}
	})
}

// jobStubs is the answer of GET /v1/jobs, written stub by stub.
type jobStubs []*structs.JobListStub

func (l jobStubs) Len() int       { return len(l) }
func (l jobStubs) Elem(i int) any { return l[i] }

func (s jobHandlers) jobRegister(w http.ResponseWriter, r *http.Request) {
	s.register(w, r, "")
}

// register serves both registration paths; urlID is the ID named by
// /v1/job/:id, which the body's job must match.
func (s jobHandlers) register(w http.ResponseWriter, r *http.Request, urlID string) {
	var req jobRegisterRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := checkSubmittedJob(req.Job, urlID, "Job ID does not match name"); err != nil {
		s.writeError(w, err)
		return
	}
	s.fillNullPolicies(req.Job)
	req.Job.Namespace = namespaceOf(req.Job.Namespace, r)
	if !allowNS(r, req.Job.Namespace, acl.NamespaceCapabilitySubmitJob) || !allowHostVolumes(r, req.Job) {
		s.writeError(w, errPermissionDenied)
		return
	}
	if err := s.checkJobRegistration(r); err != nil {
		s.writeError(w, err)
		return
	}
	// The server checks again (a job also arrives by RPC); here a job
	// over its bounds costs no forward to the leader.
	if err := req.Job.CheckBounds(); err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.registerJob(r.Context(), &req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// fillNullPolicies fills what the submitted job's restart and reschedule
// blocks left null (Nomad's CLI sends every unset field as null) from the
// declaration of the plugin serving its type, as Nomad merges them over
// its defaults. It runs here, on the job as decoded: the nulls do not
// survive a copy or a forward to the leader. Without a plugin for the
// type the server refuses the job anyway.
func (s jobHandlers) fillNullPolicies(job *structs.Job) {
	var b *structs.JobTypeBehavior
	if jt := s.jobTypes; jt != nil {
		typ := job.Type
		if typ == "" {
			typ = structs.DefaultJobType
		}
		b, _ = jt.JobTypeBehavior(typ)
	}
	job.FillNullPolicies(b)
}

// checkSubmittedJob refuses a request body without a job or a job ID, or
// whose job is not the one the URL names (urlID; "" when the URL names
// none), with mismatch as the message: Nomad words it per endpoint.
func checkSubmittedJob(job *structs.Job, urlID, mismatch string) error {
	switch {
	case job == nil:
		return badRequest("Job must be specified")
	case job.ID == "":
		return badRequest("Job ID hasn't been provided")
	case urlID != "" && job.ID != urlID:
		return badRequest("%s", mismatch)
	}
	return nil
}

// JobTypes (Config.JobTypes, optional) is a server that routes job types
// to scheduler plugins. /v1/jobs/parse then parses with the serving plugin's
// declaration of the job's type (its restart and reschedule defaults,
// the blocks it refuses); without it, on an agent running no server, or
// for a type no plugin serves, the job file is parsed knowing no type and
// the server fills the rest at registration.
type JobTypes interface {
	// JobTypeBehavior returns what the plugin serving jobType declares
	// about it, a copy the caller owns, and whether any plugin serves it.
	JobTypeBehavior(jobType string) (*structs.JobTypeBehavior, bool)
}

// parseOptions are the jobspec options of this agent's server.
func (s jobHandlers) parseOptions() jobspec.Options {
	jt := s.jobTypes
	if jt == nil {
		return jobspec.Options{}
	}
	return jobspec.Options{Defaults: func(jobType string) *structs.JobTypeBehavior {
		b, _ := jt.JobTypeBehavior(jobType)
		return b
	}}
}

func (s jobHandlers) jobParse(w http.ResponseWriter, r *http.Request) {
	var req jobParseRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if strings.TrimSpace(req.JobHCL) == "" {
		s.writeError(w, badRequest("Job spec is empty"))
		return
	}
	opts := s.parseOptions()
	if req.Variables != "" {
		opts.VarFiles = []jobspec.VarFile{{Name: parseVariablesName, Src: []byte(req.Variables)}}
	}
	if !req.Canonicalize {
		opts.Namespace = unsetNamespace
	}
	job, err := jobspec.ParseWith("job.hcl", []byte(req.JobHCL), opts)
	if err != nil {
		s.writeError(w, badRequest("Failed to parse job: %v", err))
		return
	}
	if req.Canonicalize {
		job.Canonicalize()
	} else if job.Namespace == unsetNamespace {
		// As Nomad: without canonicalize, a file naming no namespace
		// leaves it unset (the client fills the request's).
		writeJSON(w, r, http.StatusOK, jobWithoutNamespace{job})
		return
	}
	writeJSON(w, r, http.StatusOK, job)
}

// unsetNamespace marks, through the parse, a job file naming no namespace:
// no namespace name can hold a NUL.
const unsetNamespace = "\x00unset"

// jobWithoutNamespace encodes a job with its Namespace key left out.
type jobWithoutNamespace struct{ *structs.Job }

func (j jobWithoutNamespace) MarshalJSON() ([]byte, error) {
	type plain structs.Job // the job's fields, none of its methods
	c := *j.Job
	c.Namespace = ""
	raw, err := json.Marshal((*plain)(&c))
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	delete(fields, "Namespace")
	return json.Marshal(fields)
}

// jobAction is a sub-resource of /v1/job/<id>.
type jobAction struct {
	methods []string
	serve   func(s jobHandlers, w http.ResponseWriter, r *http.Request, id string)
	// anyOf lists the capabilities of which the action needs one in the
	// request's namespace (jobRule); none: checked by the handler (plan:
	// the body's job).
	anyOf []string
}

func caps(c ...string) []string { return c }

var (
	readMethods  = []string{http.MethodGet, http.MethodHead}
	writeMethods = []string{http.MethodPut, http.MethodPost}

	// jobActions are matched as path suffixes, in this order; a suffix
	// may appear once per method set (splitJobPath).
	jobActions = []struct {
		suffix string
		jobAction
	}{
		{"/allocations", jobAction{readMethods, jobHandlers.jobAllocs, caps(acl.NamespaceCapabilityReadJob)}},
		{"/evaluations", jobAction{readMethods, jobHandlers.jobEvals, caps(acl.NamespaceCapabilityReadJob)}},
		{"/summary", jobAction{readMethods, jobHandlers.jobSummary, caps(acl.NamespaceCapabilityReadJob)}},
		{"/versions", jobAction{readMethods, jobHandlers.jobVersions, caps(acl.NamespaceCapabilityReadJob)}},
		{"/deployments", jobAction{readMethods, jobHandlers.jobDeployments, caps(acl.NamespaceCapabilityReadJob)}},
		{"/deployment", jobAction{readMethods, jobHandlers.jobLatestDeployment, caps(acl.NamespaceCapabilityReadJob)}},
		{"/plan", jobAction{writeMethods, jobHandlers.jobPlan, nil}},
		{"/evaluate", jobAction{writeMethods, jobHandlers.jobEvaluate, caps(acl.NamespaceCapabilitySubmitJob)}},
		{"/dispatch", jobAction{writeMethods, jobHandlers.jobDispatch, caps(acl.NamespaceCapabilityDispatchJob)}},
		// Nomad: reading the scale status takes read-job or
		// read-job-scaling; scaling takes scale-job or submit-job.
		{"/scale", jobAction{readMethods, jobHandlers.jobScaleStatus, caps(acl.NamespaceCapabilityReadJob, acl.NamespaceCapabilityReadJobScaling)}},
		{"/scale", jobAction{writeMethods, jobHandlers.jobScale, caps(acl.NamespaceCapabilityScaleJob, acl.NamespaceCapabilitySubmitJob)}},
		{"/revert", jobAction{writeMethods, jobHandlers.jobRevert, caps(acl.NamespaceCapabilitySubmitJob)}},
		{"/periodic/force", jobAction{writeMethods, jobHandlers.jobPeriodicForce, caps(acl.NamespaceCapabilitySubmitJob)}},
		{"/submission", jobAction{readMethods, jobHandlers.jobSubmission, caps(acl.NamespaceCapabilityReadJob)}},
	}
)

// jobRoute dispatches /v1/job/<id>[/<action>]. The ID may hold slashes,
// escaped (%2F, as Nomad's client sends them) or not, so the action is
// recognised by its suffix and the rest is the ID.
func (s jobHandlers) jobRoute(w http.ResponseWriter, r *http.Request) {
	action, rest := splitJobPath(r)
	id, err := url.PathUnescape(rest)
	if err != nil || id == "" {
		writeText(w, http.StatusNotFound, "job not found")
		return
	}

	if action == nil {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			s.jobGet(w, r, id)
		case http.MethodPut, http.MethodPost:
			s.register(w, r, id)
		case http.MethodDelete:
			s.jobDeregister(w, r, id)
		default:
			methodNotAllowed(w, "GET, PUT, POST, DELETE")
		}
		return
	}
	if !slices.Contains(action.methods, r.Method) {
		methodNotAllowed(w, strings.Join(actionMethods(action), ", "))
		return
	}
	action.serve(s, w, r, id)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeText(w, http.StatusMethodNotAllowed, "Invalid method")
}

func (s jobHandlers) jobGet(w http.ResponseWriter, r *http.Request, id string) {
	view := jobView(r)
	readObject(s.HTTPServer, w, r, state.TableJobs, "job not found",
		func(j *structs.Job) (uint64, any) { return j.ModifyIndex, view(j) },
		func(ws memdb.WatchSet, st reader, q queryOptions) (*structs.Job, error) {
			return st.JobByID(ws, q.Namespace, id)
		})
}

func (s jobHandlers) jobDeregister(w http.ResponseWriter, r *http.Request, id string) {
	purge, err := parseBool(r, "purge")
	if err != nil {
		s.writeError(w, err)
		return
	}
	prio, err := parseEvalPriority(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.deregisterJob(r.Context(), namespaceOf("", r), id, structs.JobDeregisterOptions{Purge: purge, EvalPriority: prio})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

func (s jobHandlers) jobAllocs(w http.ResponseWriter, r *http.Request, id string) {
	all, err := parseBool(r, "all")
	if err != nil {
		s.writeError(w, err)
		return
	}
	readListExact(s.HTTPServer, w, r, state.TableAllocs, allocStubs, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Allocation, error) {
		return st.AllocsByJob(ws, q.Namespace, id, all)
	})
}

func (s jobHandlers) jobEvals(w http.ResponseWriter, r *http.Request, id string) {
	readListExact(s.HTTPServer, w, r, state.TableEvals, sortEvals, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Evaluation, error) {
		return st.EvalsByJob(ws, q.Namespace, id)
	})
}

func (s jobHandlers) jobSummary(w http.ResponseWriter, r *http.Request, id string) {
	readObject(s.HTTPServer, w, r, state.TableJobSummary, "job not found",
		func(sum *structs.JobSummary) (uint64, any) { return sum.ModifyIndex, sum },
		func(ws memdb.WatchSet, st reader, q queryOptions) (*structs.JobSummary, error) {
			return st.JobSummaryByID(ws, q.Namespace, id)
		})
}

func (s jobHandlers) jobVersions(w http.ResponseWriter, r *http.Request, id string) {
	diffs, err := parseBool(r, "diffs")
	if err != nil {
		s.writeError(w, err)
		return
	}
	view := jobView(r)
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			versions, err := st.JobVersionsByID(ws, q.Namespace, id)
			if err != nil {
				return 0, nil, err
			}
			idx := st.Index(state.TableJobVersions)
			if len(versions) == 0 {
				return idx, notFound("job versions not found"), nil
			}
			out := make([]*structs.Job, len(versions))
			for i, v := range versions {
				out[i] = view(v)
			}
			resp := jobVersionsResponse{Versions: out}
			if diffs {
				// Diffs of what the caller sees: a redacted Env stays so.
				resp.Diffs = []*structs.JobDiff{}
				for i := 0; i+1 < len(out); i++ {
					resp.Diffs = append(resp.Diffs, structs.DiffJobs(out[i+1], out[i], true))
				}
			}
			return idx, resp, nil
		}
	})
}

func (s jobHandlers) jobPlan(w http.ResponseWriter, r *http.Request, id string) {
	var req jobPlanRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := checkSubmittedJob(req.Job, id, "Job ID does not match"); err != nil {
		s.writeError(w, err)
		return
	}
	s.fillNullPolicies(req.Job)
	req.Job.Namespace = namespaceOf(req.Job.Namespace, r)
	if !allowNS(r, req.Job.Namespace, acl.NamespaceCapabilitySubmitJob) {
		s.writeError(w, errPermissionDenied)
		return
	}
	// The server checks again (a job also arrives by RPC); here a job
	// over its bounds costs no forward to the leader.
	if err := req.Job.CheckBounds(); err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.jobs.Plan(r.Context(), req.Job, req.Diff)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// jobEvaluateRequest is the optional body of /v1/job/<id>/evaluate.
type jobEvaluateRequest struct {
	JobID       string
	EvalOptions structs.EvalOptions
}

func (s jobHandlers) jobEvaluate(w http.ResponseWriter, r *http.Request, id string) {
	var body jobEvaluateRequest
	if err := decodeOptionalBody(r, &body); err != nil {
		s.writeError(w, err)
		return
	}
	if body.JobID != "" && body.JobID != id {
		s.writeError(w, structs.NewError(structs.ErrInvalid, "JobID %q in the body does not match the job %q of the URL", body.JobID, id))
		return
	}
	resp, err := s.jobs.Evaluate(r.Context(), namespaceOf("", r), id, body.EvalOptions)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

func (s jobHandlers) jobDispatch(w http.ResponseWriter, r *http.Request, id string) {
	var body jobDispatchRequest
	if err := decodeOptionalBody(r, &body); err != nil {
		s.writeError(w, err)
		return
	}
	if body.JobID != "" && body.JobID != id {
		s.writeError(w, badRequest("Job ID does not match"))
		return
	}
	if len(body.Payload) > structs.DispatchPayloadSizeLimit {
		s.writeError(w, badRequest("Payload exceeds maximum size; %d > %d", len(body.Payload), structs.DispatchPayloadSizeLimit))
		return
	}
	req := &structs.JobDispatchRequest{
		JobID:            id,
		Payload:          body.Payload,
		Meta:             body.Meta,
		IdPrefixTemplate: body.IdPrefixTemplate,
		Priority:         body.Priority,
		IdempotencyToken: r.URL.Query().Get("idempotency_token"),
	}
	if err := structs.CheckBounds("Dispatch", req); err != nil {
		s.writeError(w, err)
		return
	}
	if err := s.checkJobRegistration(r); err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.jobs.Dispatch(r.Context(), namespaceOf("", r), req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

func (s jobHandlers) jobPeriodicForce(w http.ResponseWriter, r *http.Request, id string) {
	resp, err := s.jobs.ForcePeriodic(r.Context(), namespaceOf("", r), id)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// userJob is a job as its reader sent it: a dispatched child's payload is
// kept snappy-compressed (for the client, which decodes it into the task's
// file), and the API answers with the bytes that were dispatched. Stored
// jobs are shared: a job with a payload is copied, never changed.
func userJob(j *structs.Job) *structs.Job {
	if j == nil || len(j.Payload) == 0 {
		return j
	}
	raw, err := snappy.Decode(nil, j.Payload)
	if err != nil {
		return j // not written by dispatch: shown as stored
	}
	c := *j
	c.Payload = raw
	return &c
}

package server

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/golang/snappy"
	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// Register validates and writes a job, with a job-register eval unless
// the job is a periodic or parameterized parent. An unchanged spec writes
// no new job version, only the eval.
func (ep Jobs) Register(ctx context.Context, in *structs.Job, enforceIndex bool, jobModifyIndex uint64) (*structs.JobRegisterResponse, error) {
	return ep.RegisterSubmission(ctx, in, nil, enforceIndex, jobModifyIndex)
}

// RegisterSubmission is Register with the job's source as submitted
// (Nomad's CLI sends it with the job), kept with the version the register
// writes (see keptSubmission).
func (ep Jobs) RegisterSubmission(ctx context.Context, in *structs.Job, sub *structs.JobSubmission, enforceIndex bool, jobModifyIndex uint64) (*structs.JobRegisterResponse, error) {
	return ep.RegisterOpts(ctx, in, structs.JobRegisterOptions{EnforceIndex: enforceIndex, JobModifyIndex: jobModifyIndex, Submission: sub})
}

// RegisterOpts is Register with every option Nomad's register request
// carries: the enforced index, the job's source, and the priority of the
// eval it creates (opts.EvalPriority, 0 for the job's own).
func (ep Jobs) RegisterOpts(ctx context.Context, in *structs.Job, opts structs.JobRegisterOptions) (*structs.JobRegisterResponse, error) {
	s := ep.srv
	if err := structs.CheckEvalPriority(opts.EvalPriority); err != nil {
		return nil, err
	}
	if r, ok, err := forward[JobRegisterArgs, structs.JobRegisterResponse](ctx, s, "Job.Register", &JobRegisterArgs{
		Job: in, EnforceIndex: opts.EnforceIndex, JobModifyIndex: opts.JobModifyIndex, Submission: opts.Submission, EvalPriority: opts.EvalPriority,
		PreserveCounts: opts.PreserveCounts,
	}); ok {
		return r, err
	}
	enforceIndex, jobModifyIndex, sub := opts.EnforceIndex, opts.JobModifyIndex, opts.Submission
	if in == nil {
		return nil, structs.NewError(structs.ErrInvalid, "Job: missing job")
	}
	sub, err := ep.keptSubmission(in, sub)
	if err != nil {
		return nil, err
	}
	job, err := ep.prepare(in)
	if err != nil {
		return nil, err
	}
	if err := ep.checkDrivers(job); err != nil {
		return nil, err
	}
	if err := ep.checkAllocLimit(job); err != nil {
		return nil, err
	}
	existing, err := s.State().JobByID(nil, job.Namespace, job.ID)
	if err != nil {
		return nil, err
	}
	if enforceIndex {
		switch {
		case existing == nil && jobModifyIndex != 0:
			return nil, structs.NewError(structs.ErrConflict, "Enforcing job modify index %d: job does not exist", jobModifyIndex)
		case existing != nil && existing.JobModifyIndex != jobModifyIndex:
			return nil, structs.NewError(structs.ErrConflict, "Enforcing job modify index %d: job exists with conflicting job modify index: %d", jobModifyIndex, existing.JobModifyIndex)
		}
	}
	if opts.PreserveCounts && existing != nil {
		preserveCounts(job, existing)
	}
	unchanged := existing != nil && !existing.SpecChanged(job)
	req := &structs.JobRegisterRequest{Namespace: job.Namespace, JobID: job.ID, RequireNamespace: true, RequireNodePool: true}
	if !unchanged {
		job.SubmitTime = s.cfg.Now().UnixNano()
		req.Job = job
		req.Submission = sub
	}
	if !job.IsParent() {
		req.Eval = s.newEval(job, structs.EvalTriggerJobRegister)
		if opts.EvalPriority != 0 {
			req.Eval.Priority = opts.EvalPriority
		}
	}
	if req.Job == nil && req.Eval == nil {
		return &structs.JobRegisterResponse{JobModifyIndex: existing.JobModifyIndex}, nil
	}
	index, err := s.raftApply(structs.JobRegisterRequestType, req)
	if err != nil {
		return nil, err
	}
	// Index is the write's, also for an unchanged spec (its eval was
	// written), as Nomad answers it (X-Nomad-Index).
	resp := &structs.JobRegisterResponse{Index: index}
	if unchanged {
		resp.JobModifyIndex = existing.JobModifyIndex
	} else {
		resp.JobModifyIndex = index
	}
	if req.Eval != nil {
		resp.EvalID, resp.EvalCreateIndex = req.Eval.ID, index
	}
	s.logger.Info("job registered", "namespace", job.Namespace, "job_id", job.ID, "type", job.Type, "changed", !unchanged, "eval_id", resp.EvalID)
	return resp, nil
}

func (s *Server) newEval(job *structs.Job, trigger string) *structs.Evaluation {
	now := s.cfg.Now().UnixNano()
	return &structs.Evaluation{
		ID: uuid.NewString(), Namespace: job.Namespace, Priority: job.Priority, Type: job.Type,
		TriggeredBy: trigger, JobID: job.ID, Status: structs.EvalStatusPending,
		CreateTime: now, ModifyTime: now,
	}
}

// prepare returns a canonical, validated copy of a submitted job,
// carrying the declaration of the plugin serving its type: the defaults
// and rules that depend on the type come from that declaration. A type no
// loaded scheduler plugin serves is refused.
func (ep Jobs) prepare(in *structs.Job) (*structs.Job, error) {
	s := ep.srv
	job := in.Copy()
	if job.Type == "" {
		job.Type = structs.DefaultJobType
	}
	b, ok := s.cfg.Schedulers.JobType(job.Type)
	if !ok {
		served := s.cfg.Schedulers.ServedTypes()
		return nil, structs.NewError(structs.ErrInvalid, "job type %q is not served by any scheduler plugin (served: %s)", job.Type, strings.Join(served, ", "))
	}
	job.TypeBehavior = b.Copy()
	// Stable is earned by a successful deployment, never submitted.
	job.Stable = false
	job.Canonicalize()
	if err := ep.resolveServiceProviders(job); err != nil {
		return nil, err
	}
	if err := job.Validate(); err != nil {
		return nil, err
	}
	if err := ep.checkNamespace(job.Namespace, job.ID); err != nil {
		return nil, err
	}
	if err := ep.checkNodePool(job); err != nil {
		return nil, err
	}
	return job, nil
}

// checkNamespace refuses a job in a namespace that does not exist
// (structs.NamespaceMissingError). The FSM checks again when it applies
// the register, which a concurrent namespace delete cannot slip past.
func (ep Jobs) checkNamespace(ns, jobID string) error {
	s := ep.srv
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	n, err := s.State().NamespaceByName(nil, ns)
	if err != nil {
		return err
	}
	if n == nil {
		return structs.NamespaceMissingError(jobID, ns)
	}
	return nil
}

// checkDrivers refuses a task whose driver no plugin of this cluster knows:
// neither a configured driver plugin nor one fingerprinted on any node.
func (ep Jobs) checkDrivers(job *structs.Job) error {
	s := ep.srv
	known := map[string]bool{}
	for _, d := range s.cfg.KnownDrivers {
		known[d] = true
	}
	// The node scan (every node of the cluster) is only needed for a
	// driver no configured plugin serves: keep it off the common path.
	allKnown := true
	for _, tg := range job.TaskGroups {
		for _, t := range tg.Tasks {
			allKnown = allKnown && known[t.Driver]
		}
	}
	if allKnown {
		return nil
	}
	nodes, err := s.State().Nodes(nil)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		for name, d := range n.Drivers {
			if d != nil && d.Detected {
				known[name] = true
			}
		}
	}
	var bad []string
	for _, tg := range job.TaskGroups {
		for _, t := range tg.Tasks {
			if !known[t.Driver] {
				bad = append(bad, fmt.Sprintf("group %q: task %q: unknown driver %q", tg.Name, t.Name, t.Driver))
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	names := make([]string, 0, len(known))
	for k := range known {
		names = append(names, k)
	}
	sort.Strings(names)
	for i := range bad {
		bad[i] += fmt.Sprintf(" (known drivers: %s)", strings.Join(names, ", "))
	}
	return &structs.ValidationError{Errors: bad}
}

// Deregister stops a job, or deletes it with purge. An unknown job is a
// no-op, as in Nomad.
func (ep Jobs) Deregister(ctx context.Context, ns, jobID string, purge bool) (*structs.JobDeregisterResponse, error) {
	return ep.DeregisterOpts(ctx, ns, jobID, structs.JobDeregisterOptions{Purge: purge})
}

// DeregisterOpts is Deregister with the priority of the eval it creates
// (opts.EvalPriority, 0 for the job's own).
func (ep Jobs) DeregisterOpts(ctx context.Context, ns, jobID string, opts structs.JobDeregisterOptions) (*structs.JobDeregisterResponse, error) {
	s := ep.srv
	if err := structs.CheckEvalPriority(opts.EvalPriority); err != nil {
		return nil, err
	}
	purge := opts.Purge
	if r, ok, err := forward[JobRefArgs, structs.JobDeregisterResponse](ctx, s, "Job.Deregister", &JobRefArgs{Namespace: ns, JobID: jobID, Purge: purge, EvalPriority: opts.EvalPriority}); ok {
		return r, err
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	job, err := s.State().JobByID(nil, ns, jobID)
	if err != nil {
		return nil, err
	}
	if job == nil {
		return &structs.JobDeregisterResponse{}, nil
	}
	req := &structs.JobDeregisterRequest{Namespace: ns, JobID: jobID, Purge: purge}
	if !job.IsParent() {
		// drover routes the stop to the job's own scheduler type (Nomad
		// hard-codes its service scheduler); every plugin handles the
		// trigger.
		req.Eval = s.newEval(job, structs.EvalTriggerJobDeregister)
		if opts.EvalPriority != 0 {
			req.Eval.Priority = opts.EvalPriority
		}
	}
	index, err := s.raftApply(structs.JobDeregisterRequestType, req)
	if err != nil {
		return nil, err
	}
	resp := &structs.JobDeregisterResponse{Index: index, JobModifyIndex: index}
	if req.Eval != nil {
		resp.EvalID, resp.EvalCreateIndex = req.Eval.ID, index
	}
	s.logger.Info("job deregistered", "namespace", ns, "job_id", jobID, "purge", purge)
	return resp, nil
}

// Evaluate forces a new evaluation of a job. With ForceReschedule, the
// job's failed allocations not yet replaced are marked
// DesiredTransition.ForceReschedule in the same Raft entry as the eval, so
// the scheduler that runs it reschedules them now.
func (ep Jobs) Evaluate(ctx context.Context, ns, jobID string, opts structs.EvalOptions) (*structs.JobRegisterResponse, error) {
	s := ep.srv
	if r, ok, err := forward[JobRefArgs, structs.JobRegisterResponse](ctx, s, "Job.Evaluate",
		&JobRefArgs{Namespace: ns, JobID: jobID, ForceReschedule: opts.ForceReschedule}); ok {
		return r, err
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	job, err := s.State().JobByID(nil, ns, jobID)
	if err != nil {
		return nil, err
	}
	if job == nil {
		return nil, structs.NewError(structs.ErrNotFound, "job not found")
	}
	if job.IsParent() {
		return nil, structs.NewError(structs.ErrInvalid, "can't evaluate periodic or parameterized job %q", jobID)
	}
	ev := s.newEval(job, structs.EvalTriggerJobRegister)
	ev.JobModifyIndex = job.JobModifyIndex
	var index uint64
	if opts.ForceReschedule {
		force, err := ep.forceRescheduleMarks(ns, jobID)
		if err != nil {
			return nil, err
		}
		index, err = s.raftApply(structs.AllocUpdateDesiredTransitionRequestType, &structs.AllocUpdateDesiredTransitionRequest{
			Allocs: force, Evals: []*structs.Evaluation{ev},
		})
		if err != nil {
			return nil, err
		}
	} else if index, err = s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{ev}}); err != nil {
		return nil, err
	}
	return &structs.JobRegisterResponse{EvalID: ev.ID, EvalCreateIndex: index, JobModifyIndex: job.JobModifyIndex, Index: index}, nil
}

// forceRescheduleMarks are the desired transitions that force the
// reschedule of a job's failed allocations still desired and not replaced.
func (ep Jobs) forceRescheduleMarks(ns, jobID string) (map[string]*structs.DesiredTransition, error) {
	s := ep.srv
	allocs, err := s.State().AllocsByJob(nil, ns, jobID, false)
	if err != nil {
		return nil, err
	}
	force := true
	out := map[string]*structs.DesiredTransition{}
	for _, a := range allocs {
		if a.ClientStatus == structs.AllocClientStatusFailed && a.DesiredStatus == structs.AllocDesiredStatusRun && a.NextAllocation == "" {
			out[a.ID] = &structs.DesiredTransition{ForceReschedule: &force}
		}
	}
	return out, nil
}

// Dispatch creates a child of a parameterized job (§3).
func (ep Jobs) Dispatch(ctx context.Context, ns string, req *structs.JobDispatchRequest) (*structs.JobDispatchResponse, error) {
	s := ep.srv
	if r, ok, err := forward[JobDispatchArgs, structs.JobDispatchResponse](ctx, s, "Job.Dispatch", &JobDispatchArgs{Namespace: ns, Request: req}); ok {
		return r, err
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	// The request's meta, token and prefix end up in the child job.
	if err := structs.CheckBounds("Dispatch", req); err != nil {
		return nil, err
	}
	if err := ep.checkNamespace(ns, req.JobID); err != nil {
		return nil, err
	}
	parent, err := s.State().JobByID(nil, ns, req.JobID)
	if err != nil {
		return nil, err
	}
	if parent == nil {
		return nil, structs.NewError(structs.ErrNotFound, "job not found")
	}
	if err := validateDispatch(parent, req); err != nil {
		return nil, err
	}
	if req.IdempotencyToken != "" {
		prior, err := ep.childWithToken(ns, parent.ID, req.IdempotencyToken)
		if err != nil {
			return nil, err
		}
		if prior != nil {
			return &structs.JobDispatchResponse{DispatchedJobID: prior.ID, JobCreateIndex: prior.CreateIndex}, nil
		}
	}
	now := s.cfg.Now()
	child := parent.Copy()
	prefix := ""
	if req.IdPrefixTemplate != "" {
		prefix = req.IdPrefixTemplate + "-"
	}
	child.ID = fmt.Sprintf("%s%s%s%d-%s", parent.ID, structs.DispatchLaunchSuffix, prefix, now.Unix(), uuid.NewString()[:8])
	child.Name = child.ID
	child.ParentID = parent.ID
	child.Dispatched = true
	child.DispatchIdempotencyToken = req.IdempotencyToken
	child.Status, child.StatusDescription = "", ""
	child.Version, child.CreateIndex, child.ModifyIndex, child.JobModifyIndex = 0, 0, 0, 0
	child.SubmitTime = now.UnixNano()
	if req.Priority != 0 {
		child.Priority = req.Priority
	}
	if len(req.Meta) > 0 {
		child.Meta = make(map[string]string, len(parent.Meta)+len(req.Meta))
		for k, v := range parent.Meta {
			child.Meta[k] = v
		}
		for k, v := range req.Meta {
			child.Meta[k] = v
		}
	}
	if len(req.Payload) > 0 {
		child.Payload = snappy.Encode(nil, req.Payload)
	} else {
		child.Payload = nil
	}
	rr := &structs.JobRegisterRequest{Job: child, Namespace: ns, JobID: child.ID, RequireNamespace: true}
	if !child.IsPeriodic() {
		rr.Eval = s.newEval(child, structs.EvalTriggerJobRegister)
	}
	index, err := s.raftApply(structs.JobRegisterRequestType, rr)
	if err != nil {
		return nil, err
	}
	if req.IdempotencyToken != "" {
		// A concurrent dispatch with the same token may have won: the FSM
		// then dropped this child, and the winner is the answer.
		written, err := s.State().JobByID(nil, ns, child.ID)
		if err != nil {
			return nil, err
		}
		if written == nil {
			if prior, err := ep.childWithToken(ns, parent.ID, req.IdempotencyToken); err != nil || prior != nil {
				if prior == nil {
					return nil, err
				}
				return &structs.JobDispatchResponse{DispatchedJobID: prior.ID, JobCreateIndex: prior.CreateIndex, Index: index}, nil
			}
		}
	}
	resp := &structs.JobDispatchResponse{DispatchedJobID: child.ID, JobCreateIndex: index, Index: index}
	if rr.Eval != nil {
		resp.EvalID, resp.EvalCreateIndex = rr.Eval.ID, index
	}
	s.logger.Info("job dispatched", "namespace", ns, "parent_id", parent.ID, "job_id", child.ID, "eval_id", resp.EvalID)
	return resp, nil
}

func validateDispatch(parent *structs.Job, req *structs.JobDispatchRequest) error {
	if !parent.IsParameterized() {
		return structs.NewError(structs.ErrInvalid, "Specified job %q is not a parameterized job", parent.ID)
	}
	if parent.Stop {
		return structs.NewError(structs.ErrInvalid, "Specified job %q is stopped", parent.ID)
	}
	// The child's ID is the parent's, the prefix, then a clean time and
	// UUID part: checking the parts checks the ID.
	if err := structs.ValidateDispatchIDs(req.IdPrefixTemplate, parent.ID+structs.DispatchLaunchSuffix+req.IdPrefixTemplate); err != nil {
		return err
	}
	var l []string
	cfg := parent.ParameterizedJob
	switch {
	case cfg.Payload == structs.DispatchPayloadForbidden && len(req.Payload) > 0:
		l = append(l, "Payload: not allowed by the job's parameterized block (payload = \"forbidden\")")
	case cfg.Payload == structs.DispatchPayloadRequired && len(req.Payload) == 0:
		l = append(l, "Payload: required by the job's parameterized block (payload = \"required\")")
	}
	if len(req.Payload) > structs.DispatchPayloadSizeLimit {
		l = append(l, fmt.Sprintf("Payload: exceeds maximum size; %d > %d bytes", len(req.Payload), structs.DispatchPayloadSizeLimit))
	}
	allowed := map[string]bool{}
	for _, k := range cfg.MetaRequired {
		allowed[k] = true
	}
	for _, k := range cfg.MetaOptional {
		allowed[k] = true
	}
	var unpermitted, missing []string
	for k := range req.Meta {
		if !allowed[k] {
			unpermitted = append(unpermitted, k)
		}
	}
	for _, k := range cfg.MetaRequired {
		if _, ok := req.Meta[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(unpermitted)
	if len(unpermitted) > 0 {
		l = append(l, fmt.Sprintf("Meta: dispatch request included unpermitted metadata keys: %v", unpermitted))
	}
	if len(missing) > 0 {
		l = append(l, fmt.Sprintf("Meta: dispatch did not provide required meta keys: %v", missing))
	}
	if req.Priority != 0 && (req.Priority < structs.JobMinPriority || req.Priority > structs.JobMaxPriority) {
		l = append(l, fmt.Sprintf("Priority: %d must be between %d and %d", req.Priority, structs.JobMinPriority, structs.JobMaxPriority))
	}
	if len(l) > 0 {
		return &structs.ValidationError{Errors: l}
	}
	return nil
}

// ForcePeriodic launches a periodic job's child now.
func (ep Jobs) ForcePeriodic(ctx context.Context, ns, jobID string) (*structs.PeriodicForceResponse, error) {
	s := ep.srv
	if r, ok, err := forward[JobRefArgs, structs.PeriodicForceResponse](ctx, s, "Periodic.Force", &JobRefArgs{Namespace: ns, JobID: jobID}); ok {
		return r, err
	}
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	job, err := s.State().JobByID(nil, ns, jobID)
	if err != nil {
		return nil, err
	}
	if job == nil {
		return nil, structs.NewError(structs.ErrNotFound, "job not found")
	}
	if !job.IsPeriodic() || job.IsParameterized() {
		return nil, structs.NewError(structs.ErrInvalid, "can't force launch non-periodic job %q", jobID)
	}
	if job.Stop {
		return nil, structs.NewError(structs.ErrInvalid, "can't force launch stopped job %q", jobID)
	}
	ev, index, err := s.periodic.Force(job, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	resp := &structs.PeriodicForceResponse{Index: index}
	if ev != nil {
		resp.EvalID, resp.EvalCreateIndex = ev.ID, index
	}
	return resp, nil
}

// childWithToken finds the live child of parent dispatched with token.
func (ep Jobs) childWithToken(ns, parent, token string) (*structs.Job, error) {
	s := ep.srv
	children, err := s.State().JobsByParent(nil, ns, parent)
	if err != nil {
		return nil, err
	}
	for _, c := range children {
		if c.DispatchIdempotencyToken == token && !c.Stop {
			return c, nil
		}
	}
	return nil, nil
}

// preserveCounts gives each group of job that the stored job has already
// that group's stored count (Nomad's PreserveCounts): a register that
// would reset what scaling set keeps it. New groups keep their own.
func preserveCounts(job, existing *structs.Job) {
	stored := make(map[string]int, len(existing.TaskGroups))
	for _, tg := range existing.TaskGroups {
		stored[tg.Name] = tg.Count
	}
	for _, tg := range job.TaskGroups {
		if n, ok := stored[tg.Name]; ok {
			tg.Count = n
		}
	}
}

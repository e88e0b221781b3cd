package server

import (
	"context"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/deploywatcher"
	"github.com/drover-org/drover/core/structs"
)

// newDeploymentWatcher builds the leader's deployment watcher; the leader
// loop that runs it stops it with leadership.
func (s *Server) newDeploymentWatcher() *deploywatcher.Watcher {
	return deploywatcher.New(deploywatcher.Config{
		State: s.State, Apply: s.raftApply, NewEval: s.newEval, Now: s.cfg.Now,
		Logger: s.logger.Named("deployment_watcher"),
	})
}

// Deployment RPC arguments.
type (
	DeploymentPromoteArgs struct {
		DeploymentID string
		All          bool
		Groups       []string
	}
	DeploymentPauseArgs struct {
		DeploymentID string
		Pause        bool
	}
	DeploymentFailArgs        struct{ DeploymentID string }
	DeploymentAllocHealthArgs struct {
		DeploymentID           string
		HealthyAllocationIDs   []string
		UnhealthyAllocationIDs []string
	}
)

func (ep Deployments) register(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "Deployment.Promote", func(ctx context.Context, a *DeploymentPromoteArgs) (*structs.DeploymentUpdateResponse, error) {
		return ep.Promote(mark(ctx), a.DeploymentID, a.All, a.Groups)
	})
	rpc.Handle(rs, "Deployment.Pause", func(ctx context.Context, a *DeploymentPauseArgs) (*structs.DeploymentUpdateResponse, error) {
		return ep.Pause(mark(ctx), a.DeploymentID, a.Pause)
	})
	rpc.Handle(rs, "Deployment.Fail", func(ctx context.Context, a *DeploymentFailArgs) (*structs.DeploymentUpdateResponse, error) {
		return ep.Fail(mark(ctx), a.DeploymentID)
	})
	rpc.Handle(rs, "Deployment.SetAllocHealth", func(ctx context.Context, a *DeploymentAllocHealthArgs) (*structs.DeploymentUpdateResponse, error) {
		return ep.SetAllocHealth(mark(ctx), a.DeploymentID, a.HealthyAllocationIDs, a.UnhealthyAllocationIDs)
	})
}

// active reads a deployment that a write acts on, and its job.
func (ep Deployments) active(id, what string) (*structs.Deployment, *structs.Job, error) {
	s := ep.srv
	if id == "" {
		return nil, nil, structs.NewError(structs.ErrInvalid, "Deployment ID must be specified")
	}
	d, err := s.State().DeploymentByID(nil, id)
	if err != nil {
		return nil, nil, err
	}
	if d == nil {
		return nil, nil, structs.NewError(structs.ErrNotFound, "deployment %q not found", id)
	}
	if !d.Active() {
		return nil, nil, structs.NewError(structs.ErrInvalid, "can't %s terminal deployment %q (status %s)", what, id, d.Status)
	}
	job, err := s.State().JobByID(nil, d.Namespace, d.JobID)
	if err != nil {
		return nil, nil, err
	}
	if job == nil {
		return nil, nil, structs.NewError(structs.ErrNotFound, "job %q of deployment %q not found", d.JobID, id)
	}
	return d, job, nil
}

func (ep Deployments) eval(d *structs.Deployment, job *structs.Job) *structs.Evaluation {
	s := ep.srv
	ev := s.newEval(job, structs.EvalTriggerDeploymentWatcher)
	ev.JobModifyIndex = job.JobModifyIndex
	ev.DeploymentID = d.ID
	return ev
}

func deploymentResponse(index uint64, ev *structs.Evaluation, reverted *structs.Job) *structs.DeploymentUpdateResponse {
	r := &structs.DeploymentUpdateResponse{Index: index, DeploymentModifyIndex: index}
	if ev != nil {
		r.EvalID, r.EvalCreateIndex = ev.ID, index
	}
	if reverted != nil {
		v := reverted.Version
		r.RevertedJobVersion = &v
	}
	return r
}

// Promote promotes the canaries of every group (all) or of the
// named groups, with an eval that places the rest.
func (ep Deployments) Promote(ctx context.Context, id string, all bool, groups []string) (*structs.DeploymentUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[DeploymentPromoteArgs, structs.DeploymentUpdateResponse](ctx, s, "Deployment.Promote", &DeploymentPromoteArgs{DeploymentID: id, All: all, Groups: groups}); ok {
		return r, err
	}
	d, job, err := ep.active(id, "promote")
	if err != nil {
		return nil, err
	}
	if !all && len(groups) == 0 {
		return nil, structs.NewError(structs.ErrInvalid, "Groups: name the task groups to promote, or set All")
	}
	for _, g := range groups {
		if d.TaskGroups[g] == nil {
			return nil, structs.NewError(structs.ErrInvalid, "Groups: deployment %q has no task group %q", id, g)
		}
	}
	ev := ep.eval(d, job)
	index, err := s.raftApply(structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: id, All: all, Groups: groups, Eval: ev})
	if err != nil {
		return nil, err
	}
	s.logger.Info("deployment promoted", "deployment_id", id, "all", all, "groups", groups)
	return deploymentResponse(index, ev, nil), nil
}

// Pause pauses a running deployment or resumes a paused one (with
// an eval, so that the rollout continues).
func (ep Deployments) Pause(ctx context.Context, id string, pause bool) (*structs.DeploymentUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[DeploymentPauseArgs, structs.DeploymentUpdateResponse](ctx, s, "Deployment.Pause", &DeploymentPauseArgs{DeploymentID: id, Pause: pause}); ok {
		return r, err
	}
	verb := map[bool]string{true: "pause", false: "resume"}[pause]
	d, job, err := ep.active(id, verb)
	if err != nil {
		return nil, err
	}
	req := &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{DeploymentID: id}}
	if pause {
		req.DeploymentUpdate.Status, req.DeploymentUpdate.StatusDescription = structs.DeploymentStatusPaused, structs.DeploymentStatusDescriptionPaused
	} else {
		req.DeploymentUpdate.Status, req.DeploymentUpdate.StatusDescription = structs.DeploymentStatusRunning, structs.DeploymentStatusDescriptionRunning
		req.Eval = ep.eval(d, job)
	}
	index, err := s.raftApply(structs.DeploymentStatusUpdateRequestType, req)
	if err != nil {
		return nil, err
	}
	s.logger.Info("deployment "+verb+"d", "deployment_id", id)
	return deploymentResponse(index, req.Eval, nil), nil
}

// Fail fails a deployment as an operator asks, reverting the job
// when a group has auto_revert (as the watcher does).
func (ep Deployments) Fail(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[DeploymentFailArgs, structs.DeploymentUpdateResponse](ctx, s, "Deployment.Fail", &DeploymentFailArgs{DeploymentID: id}); ok {
		return r, err
	}
	d, job, err := ep.active(id, "fail")
	if err != nil {
		return nil, err
	}
	revert := false
	for _, st := range d.TaskGroups {
		revert = revert || st.AutoRevert
	}
	req, err := deploywatcher.FailRequest(s.State(), d, job, structs.DeploymentStatusDescriptionFailedByUser, revert, s.newEval, s.cfg.Now())
	if err != nil {
		return nil, err
	}
	index, err := s.raftApply(structs.DeploymentStatusUpdateRequestType, req)
	if err != nil {
		return nil, err
	}
	s.logger.Info("deployment failed by operator", "deployment_id", id, "reverted", req.Job != nil)
	var reverted *structs.Job
	if req.Job != nil {
		if reverted, err = s.State().JobByID(nil, job.Namespace, job.ID); err != nil {
			return nil, err
		}
	}
	return deploymentResponse(index, req.Eval, reverted), nil
}

// SetAllocHealth sets the health of allocations of a deployment
// by hand (health_check = "manual"), with an eval.
func (ep Deployments) SetAllocHealth(ctx context.Context, id string, healthy, unhealthy []string) (*structs.DeploymentUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[DeploymentAllocHealthArgs, structs.DeploymentUpdateResponse](ctx, s, "Deployment.SetAllocHealth",
		&DeploymentAllocHealthArgs{DeploymentID: id, HealthyAllocationIDs: healthy, UnhealthyAllocationIDs: unhealthy}); ok {
		return r, err
	}
	if len(healthy)+len(unhealthy) == 0 {
		return nil, structs.NewError(structs.ErrInvalid, "HealthyAllocationIDs, UnhealthyAllocationIDs: must name at least one allocation")
	}
	if n := len(healthy) + len(unhealthy); n > structs.MaxDeploymentAllocHealth {
		return nil, structs.NewError(structs.ErrInvalid, "HealthyAllocationIDs, UnhealthyAllocationIDs: %d allocations, at most %d", n, structs.MaxDeploymentAllocHealth)
	}
	d, job, err := ep.active(id, "set allocation health of")
	if err != nil {
		return nil, err
	}
	for _, list := range [][]string{healthy, unhealthy} {
		for _, aid := range list {
			a, err := s.State().AllocByID(nil, aid)
			if err != nil {
				return nil, err
			}
			if a == nil || a.DeploymentID != id {
				return nil, structs.NewError(structs.ErrInvalid, "HealthyAllocationIDs, UnhealthyAllocationIDs: allocation %q is not part of deployment %q", aid, id)
			}
		}
	}
	req := &structs.DeploymentAllocHealthRequest{
		DeploymentID: id, HealthyAllocationIDs: healthy, UnhealthyAllocationIDs: unhealthy, Eval: ep.eval(d, job),
	}
	if len(unhealthy) > 0 {
		// An operator's unhealthy verdict fails the deployment at once,
		// whatever the progress deadline (which lets the watcher replace
		// the allocations a client reports unhealthy instead), reverting
		// the job when a group of those allocations asks for auto_revert,
		// as Nomad does.
		revert := false
		for _, aid := range unhealthy {
			a, err := s.State().AllocByID(nil, aid)
			if err != nil {
				return nil, err
			}
			revert = revert || d.TaskGroups[a.TaskGroup] != nil && d.TaskGroups[a.TaskGroup].AutoRevert
		}
		fail, err := deploywatcher.FailRequest(s.State(), d, job, structs.DeploymentStatusDescriptionFailedAllocations, revert, s.newEval, s.cfg.Now())
		if err != nil {
			return nil, err
		}
		req.DeploymentUpdate, req.Job, req.Eval = fail.DeploymentUpdate, fail.Job, fail.Eval
	}
	index, err := s.raftApply(structs.DeploymentAllocHealthRequestType, req)
	if err != nil {
		return nil, err
	}
	var reverted *structs.Job
	if req.Job != nil {
		if reverted, err = s.State().JobByID(nil, job.Namespace, job.ID); err != nil {
			return nil, err
		}
	}
	return deploymentResponse(index, req.Eval, reverted), nil
}

package schedio

import (
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// convertPlanDeployment adds a plugin plan's deployment part to plan: the
// deployment it creates, its status updates, and the deployment of every
// new alloc (the created deployment, or else the job's active deployment of
// its current version) with the canary flag of its placement. Everything
// the plugin sends is checked; a plan that breaks a rule is refused whole
// with an ErrInvalid naming the field.
func convertPlanDeployment(snap PlanState, ev *structs.Evaluation, job *structs.Job, p *pb.Plan, plan *structs.Plan, newAllocs map[string]bool, now time.Time) error {
	if p == nil {
		return nil
	}
	canary := map[string]bool{}
	for _, pa := range p.NodeAllocation {
		if pa.Canary {
			canary[pa.Id] = true
		}
	}
	if p.CreateDeployment == nil && len(p.DeploymentUpdates) == 0 && len(canary) == 0 && (job == nil || job.TypeBehavior == nil || !job.TypeBehavior.Deployments) {
		return nil // the common case of types without deployments
	}
	var existing *structs.Deployment
	if p.CreateDeployment != nil {
		d, again, err := newPlanDeployment(snap, ev, job, p.CreateDeployment, now)
		if err != nil {
			return err
		}
		plan.Deployment, existing = d, again
	}
	if n := len(p.DeploymentUpdates); n > structs.MaxDeploymentUpdates {
		return planDeployError(ev, "deployment_updates has %d updates, at most %d are allowed", n, structs.MaxDeploymentUpdates)
	}
	for i, u := range p.DeploymentUpdates {
		if u == nil {
			return planDeployError(ev, "deployment_updates[%d] is empty", i)
		}
		if !structs.DeploymentStatusKnown(u.Status) {
			return planDeployError(ev, "deployment_updates[%d].status %q is not a deployment status", i, u.Status)
		}
		d, err := snap.DeploymentByID(nil, u.DeploymentId)
		if err != nil {
			return err
		}
		if d == nil || d.Namespace != ev.Namespace || d.JobID != ev.JobID {
			return planDeployError(ev, "deployment_updates[%d].deployment_id %q is not a deployment of the job", i, u.DeploymentId)
		}
		if len(u.StatusDescription) > 1024 {
			return planDeployError(ev, "deployment_updates[%d].status_description is %d bytes, at most 1024", i, len(u.StatusDescription))
		}
		plan.DeploymentUpdates = append(plan.DeploymentUpdates, &structs.DeploymentStatusUpdate{
			DeploymentID: u.DeploymentId, Status: u.Status, StatusDescription: u.StatusDescription,
		})
	}
	target := plan.Deployment
	if existing != nil {
		target = existing
	}
	if target == nil && job != nil {
		latest, err := snap.LatestDeploymentByJob(nil, job.Namespace, job.ID)
		if err != nil {
			return err
		}
		if latest.Active() && latest.JobCreateIndex == job.CreateIndex && latest.JobVersion == job.Version && !cancelledBy(plan, latest.ID) {
			target = latest
		}
	}
	for _, allocs := range plan.NodeAllocation {
		for _, a := range allocs {
			if !newAllocs[a.ID] {
				continue
			}
			in := target != nil && target.TaskGroups[a.TaskGroup] != nil
			if canary[a.ID] && !in {
				return planDeployError(ev, "placed alloc %q is a canary, but group %q has no active deployment", a.ID, a.TaskGroup)
			}
			if in {
				a.DeploymentID = target.ID
				a.DeploymentStatus = &structs.AllocDeploymentStatus{Canary: canary[a.ID]}
			}
		}
	}
	return nil
}

// cancelledBy reports whether the plan ends the deployment.
func cancelledBy(plan *structs.Plan, id string) bool {
	for _, u := range plan.DeploymentUpdates {
		if u.DeploymentID == id && !structs.DeploymentStatusActive(u.Status) {
			return true
		}
	}
	return false
}

// newPlanDeployment checks a plugin's proposed deployment and builds it: the
// job fields, status and progress deadlines are the core's; the desired
// counts are the plugin's, bounded by the job. A proposal made again (the
// eval's retry after a partial commit created it) returns the stored
// deployment as again, and no new one.
func newPlanDeployment(snap PlanState, ev *structs.Evaluation, job *structs.Job, in *pb.Deployment, now time.Time) (d, again *structs.Deployment, err error) {
	d, err = buildPlanDeployment(snap, ev, job, in, now)
	var dup *duplicateDeployment
	if errors.As(err, &dup) {
		return nil, dup.d, nil
	}
	return d, nil, err
}

// duplicateDeployment: the proposed ID names an active deployment of the
// job's current version.
type duplicateDeployment struct{ d *structs.Deployment }

func (e *duplicateDeployment) Error() string { return "deployment " + e.d.ID + " exists" }

func buildPlanDeployment(snap PlanState, ev *structs.Evaluation, job *structs.Job, in *pb.Deployment, now time.Time) (*structs.Deployment, error) {
	switch {
	case job == nil || job.Stop:
		return nil, planDeployError(ev, "create_deployment for a job that is stopped or gone")
	case job.TypeBehavior == nil || !job.TypeBehavior.Deployments:
		return nil, planDeployError(ev, "create_deployment, but %s jobs do not declare deployments (JobTypeInfo.deployments)", job.Type)
	case len(in.TaskGroups) == 0:
		return nil, planDeployError(ev, "create_deployment.task_groups is empty")
	}
	id := in.Id
	if id == "" {
		// Deterministic: a retried eval proposes the same deployment.
		id = uuid.NewSHA1(uuid.NameSpaceOID, []byte("drover-deployment/"+ev.ID)).String()
	} else if _, err := uuid.Parse(id); err != nil {
		return nil, planDeployError(ev, "create_deployment.id %q is not a UUID", id)
	}
	if existing, err := snap.DeploymentByID(nil, id); err != nil {
		return nil, err
	} else if existing != nil {
		if existing.Active() && existing.Namespace == job.Namespace && existing.JobID == job.ID &&
			existing.JobCreateIndex == job.CreateIndex && existing.JobVersion == job.Version {
			return nil, &duplicateDeployment{existing}
		}
		return nil, planDeployError(ev, "create_deployment.id %q already names a deployment", id)
	}
	d := &structs.Deployment{
		ID: id, Namespace: job.Namespace, JobID: job.ID, JobVersion: job.Version, JobModifyIndex: job.JobModifyIndex,
		JobSpecModifyIndex: job.JobModifyIndex, JobCreateIndex: job.CreateIndex, EvalPriority: ev.Priority,
		Status: structs.DeploymentStatusRunning, StatusDescription: structs.DeploymentStatusDescriptionRunning,
		TaskGroups: make(map[string]*structs.DeploymentState, len(in.TaskGroups)),
		CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
	}
	for name, g := range in.TaskGroups {
		tg := job.LookupTaskGroup(name)
		if tg == nil {
			return nil, planDeployError(ev, "create_deployment.task_groups names group %q, which the job does not have", name)
		}
		if g == nil {
			return nil, planDeployError(ev, "create_deployment.task_groups[%q] is empty", name)
		}
		if !tg.Update.HasDeployment() {
			return nil, planDeployError(ev, "create_deployment.task_groups names group %q, which has no update block with max_parallel > 0", name)
		}
		limit := max(tg.Count, tg.Update.Canary)
		if g.DesiredTotal < 0 || int(g.DesiredTotal) > limit {
			return nil, planDeployError(ev, "create_deployment.task_groups[%q].desired_total is %d, must be 0..%d (the group's count)", name, g.DesiredTotal, limit)
		}
		if g.DesiredCanaries < 0 || int(g.DesiredCanaries) > limit {
			return nil, planDeployError(ev, "create_deployment.task_groups[%q].desired_canaries is %d, must be 0..%d", name, g.DesiredCanaries, limit)
		}
		st := &structs.DeploymentState{
			AutoRevert: tg.Update.AutoRevert, AutoPromote: tg.Update.AutoPromote, ProgressDeadline: tg.Update.ProgressDeadline,
			DesiredTotal: int(g.DesiredTotal), DesiredCanaries: int(g.DesiredCanaries),
		}
		if st.ProgressDeadline > 0 {
			st.RequireProgressBy = now.Add(st.ProgressDeadline).UTC()
		}
		d.TaskGroups[name] = st
	}
	return d, nil
}

func planDeployError(ev *structs.Evaluation, format string, args ...any) error {
	args = append([]any{ev.JobID}, args...)
	return structs.NewError(structs.ErrInvalid, "scheduler plugin's plan for job %q: "+format, args...)
}

package schedio

import (
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// The deployment part of the scheduling input: the job's latest deployment,
// each group's update block and each alloc's deployment status.

// deploymentInput returns the job's latest deployment of its current
// incarnation, active or not, for a type that declares deployments.
func deploymentInput(snap RequestState, job *structs.Job) (*pb.Deployment, error) {
	if job == nil || job.TypeBehavior == nil || !job.TypeBehavior.Deployments {
		return nil, nil
	}
	d, err := snap.LatestDeploymentByJob(nil, job.Namespace, job.ID)
	if err != nil || d == nil || d.JobCreateIndex != job.CreateIndex {
		return nil, err
	}
	return deploymentToPB(d), nil
}

func deploymentToPB(d *structs.Deployment) *pb.Deployment {
	p := &pb.Deployment{
		Id: d.ID, JobVersion: d.JobVersion, JobModifyIndex: d.JobModifyIndex, JobCreateIndex: d.JobCreateIndex,
		Status: d.Status, StatusDescription: d.StatusDescription, CreateIndex: d.CreateIndex, ModifyIndex: d.ModifyIndex,
		TaskGroups: make(map[string]*pb.DeploymentGroupState, len(d.TaskGroups)),
	}
	for name, s := range d.TaskGroups {
		g := &pb.DeploymentGroupState{
			Promoted: s.Promoted, DesiredCanaries: int32(s.DesiredCanaries), DesiredTotal: int32(s.DesiredTotal),
			PlacedCanaries: s.PlacedCanaries, PlacedAllocs: int32(s.PlacedAllocs), HealthyAllocs: int32(s.HealthyAllocs),
			UnhealthyAllocs: int32(s.UnhealthyAllocs), AutoRevert: s.AutoRevert, AutoPromote: s.AutoPromote,
			ProgressDeadlineNs: int64(s.ProgressDeadline),
		}
		if !s.RequireProgressBy.IsZero() {
			g.RequireProgressByNs = s.RequireProgressBy.UnixNano()
		}
		p.TaskGroups[name] = g
	}
	return p
}

// updateToPB is a group's update block; nil when it has none (the Nomad
// API client sends an empty block for every job).
func updateToPB(u *structs.UpdateStrategy) *pb.UpdateStrategy {
	if u.IsEmpty() {
		return nil
	}
	return &pb.UpdateStrategy{
		MaxParallel: int32(u.MaxParallel), HealthCheck: u.HealthCheck, MinHealthyTimeNs: int64(u.MinHealthyTime),
		HealthyDeadlineNs: int64(u.HealthyDeadline), ProgressDeadlineNs: int64(u.ProgressDeadline),
		AutoRevert: u.AutoRevert, AutoPromote: u.AutoPromote, Canary: int32(u.Canary), StaggerNs: int64(u.Stagger),
	}
}

// allocDeploymentToPB fills an alloc's deployment fields.
func allocDeploymentToPB(a *structs.Allocation, p *pb.Allocation) {
	p.DeploymentId = a.DeploymentID
	p.Canary = a.DeploymentStatus.IsCanary()
	switch {
	case a.DeploymentStatus.IsHealthy():
		p.Healthy = pb.AllocHealth_ALLOC_HEALTH_HEALTHY
	case a.DeploymentStatus.IsUnhealthy():
		p.Healthy = pb.AllocHealth_ALLOC_HEALTH_UNHEALTHY
	}
}

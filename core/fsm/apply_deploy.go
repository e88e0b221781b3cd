package fsm

import (
	"fmt"

	"github.com/drover-org/drover/core/structs"
)

// Deployment entries. Each writes its deployment change, the job version an
// auto-revert registers again (when set) and its eval in one transaction;
// the hooks learn of the job and the eval after the commit.

var deploymentTypeNames = map[structs.MessageType]string{
	structs.DeploymentStatusUpdateRequestType: "DeploymentStatusUpdate",
	structs.DeploymentPromoteRequestType:      "DeploymentPromote",
	structs.DeploymentAllocHealthRequestType:  "DeploymentAllocHealth",
	structs.DeploymentDeleteRequestType:       "DeploymentDelete",
}

func (f *FSM) applyDeploymentStatusUpdate(index uint64, buf []byte) any {
	req := decode[structs.DeploymentStatusUpdateRequest](structs.DeploymentStatusUpdateRequestType, index, buf)
	if req.Job != nil {
		req.Job.Canonicalize()
	}
	if err := f.State().At(at(req.Now)).UpdateDeploymentStatus(index, req); err != nil {
		return err
	}
	f.deploymentWritten(req.Job, req.Eval)
	return nil
}

func (f *FSM) applyDeploymentPromote(index uint64, buf []byte) any {
	req := decode[structs.DeploymentPromoteRequest](structs.DeploymentPromoteRequestType, index, buf)
	if err := f.State().At(at(req.Now)).UpdateDeploymentPromotion(index, req); err != nil {
		return err
	}
	f.deploymentWritten(nil, req.Eval)
	return nil
}

func (f *FSM) applyDeploymentAllocHealth(index uint64, buf []byte) any {
	req := decode[structs.DeploymentAllocHealthRequest](structs.DeploymentAllocHealthRequestType, index, buf)
	if req.Job != nil {
		req.Job.Canonicalize()
	}
	if err := f.State().At(at(req.Now)).UpdateDeploymentAllocHealth(index, req); err != nil {
		return err
	}
	f.deploymentWritten(req.Job, req.Eval)
	return nil
}

func (f *FSM) applyDeploymentDelete(index uint64, buf []byte) any {
	req := decode[structs.DeploymentDeleteRequest](structs.DeploymentDeleteRequestType, index, buf)
	return f.State().DeleteDeployments(index, req.Deployments)
}

// deploymentWritten tells the hooks about an entry's job and eval.
func (f *FSM) deploymentWritten(job *structs.Job, ev *structs.Evaluation) {
	if job != nil {
		if cur, err := f.State().JobByID(nil, job.Namespace, job.ID); err == nil && cur != nil {
			f.hooks.JobUpserted(cur)
		}
	}
	if ev != nil {
		f.evalsCommitted([]*structs.Evaluation{ev})
	}
}

// The checkers bound what one entry carries, so that the leader never
// commits an entry whose work is unbounded.

func checkDeploymentStatusUpdate(buf []byte) error {
	return checkBounded[structs.DeploymentStatusUpdateRequest](buf, func(r *structs.DeploymentStatusUpdateRequest) error {
		if r.DeploymentUpdate == nil {
			return fmt.Errorf("DeploymentUpdate: missing")
		}
		return nil
	})
}

func checkDeploymentPromote(buf []byte) error {
	return checkBounded[structs.DeploymentPromoteRequest](buf, func(r *structs.DeploymentPromoteRequest) error {
		if n := len(r.Groups); n > structs.MaxCollectionElements {
			return fmt.Errorf("Groups: %d task groups, more than %d", n, structs.MaxCollectionElements)
		}
		return nil
	})
}

func checkDeploymentAllocHealth(buf []byte) error {
	return checkBounded[structs.DeploymentAllocHealthRequest](buf, func(r *structs.DeploymentAllocHealthRequest) error {
		if n := len(r.HealthyAllocationIDs) + len(r.UnhealthyAllocationIDs); n > structs.MaxDeploymentAllocHealth {
			return fmt.Errorf("HealthyAllocationIDs and UnhealthyAllocationIDs: %d allocations, more than %d", n, structs.MaxDeploymentAllocHealth)
		}
		return nil
	})
}

func checkDeploymentDelete(buf []byte) error {
	return checkBounded[structs.DeploymentDeleteRequest](buf, func(r *structs.DeploymentDeleteRequest) error {
		if n := len(r.Deployments); n > structs.MaxDeploymentAllocHealth {
			return fmt.Errorf("Deployments: %d deployments, more than %d", n, structs.MaxDeploymentAllocHealth)
		}
		return nil
	})
}

// checkPlanResults is check for plan results, which also bounds the
// deployment status updates a plan carries.
func checkPlanResults(buf []byte) error {
	return checkBounded[structs.ApplyPlanResultsRequest](buf, func(r *structs.ApplyPlanResultsRequest) error {
		if n := len(r.DeploymentUpdates); n > structs.MaxDeploymentUpdates {
			return fmt.Errorf("DeploymentUpdates: %d updates, more than %d", n, structs.MaxDeploymentUpdates)
		}
		return nil
	})
}

// checkBounded decodes as check does, then applies bound.
func checkBounded[T any](buf []byte, bound func(*T) error) error {
	if err := check[T](buf); err != nil {
		return err
	}
	req := new(T)
	if err := unmarshal(buf, req); err != nil {
		return err
	}
	return bound(req)
}

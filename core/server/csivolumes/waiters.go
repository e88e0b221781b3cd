package csivolumes

import (
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// WaiterEvals builds an eval (queued-allocs, what an unblocked eval
// carries and every scheduler takes) for every job of ns that
// asks for one of the volumes and could not place all it wanted at its
// last evaluation: the write that registers the volume or frees a claim
// carries them, so the jobs are scheduled again once there is room. A
// job of a type that blocks its failed evals is left to the blocked-eval
// tracker, which the same write wakes. System and sysbatch jobs never
// block: without these evals they would wait for the next node change.
//
// At most Config.MaxWaiterEvals go with one write, so that the entry stays
// small however many jobs wait: the others are evaluated at the next
// write that frees a claim of the volume (or a node change), and a job
// placed meanwhile needs none.
func (vs *Volumes) WaiterEvals(ns string, volIDs []string) ([]*structs.Evaluation, error) {
	if len(volIDs) == 0 {
		return nil, nil
	}
	st := vs.state()
	jobs, err := st.JobsByNamespace(nil, ns)
	if err != nil {
		return nil, err
	}
	var out []*structs.Evaluation
	for _, j := range jobs {
		if j.Stop || j.IsParent() || !jobAsksForVolume(j, volIDs) {
			continue
		}
		evs, err := st.EvalsByJob(nil, j.Namespace, j.ID)
		if err != nil {
			return nil, err
		}
		if !LastEvalFailedPlacement(evs) {
			continue
		}
		if len(out) == vs.maxWaiterEvals {
			vs.logger.Warn("more jobs wait for CSI volumes than one write evaluates; the rest wait for the next",
				"namespace", ns, "volumes", volIDs, "evaluated", len(out))
			break
		}
		out = append(out, vs.newEval(j, structs.EvalTriggerQueuedAllocs))
		out[len(out)-1].JobModifyIndex = j.JobModifyIndex
	}
	return out, nil
}

// jobAsksForVolume reports whether a group of j claims one of the CSI
// volumes, by its source or, with per_alloc, as "<source>[<index>]".
func jobAsksForVolume(j *structs.Job, volIDs []string) bool {
	for _, tg := range j.TaskGroups {
		for _, req := range tg.Volumes {
			if req == nil || req.Type != structs.VolumeTypeCSI {
				continue
			}
			for _, id := range volIDs {
				if id == req.Source || (req.PerAlloc && strings.HasPrefix(id, req.Source+"[") && strings.HasSuffix(id, "]")) {
					return true
				}
			}
		}
	}
	return false
}

// LastEvalFailedPlacement reports whether a job may be waiting for room:
// its newest eval finished with placements it could not make, or an eval
// is pending (it may be scheduling from a snapshot older than the change).
// A job with a blocked eval is the blocked-eval tracker's.
func LastEvalFailedPlacement(evs []*structs.Evaluation) bool {
	var last *structs.Evaluation
	pending := false
	for _, ev := range evs {
		switch ev.Status {
		case structs.EvalStatusBlocked:
			return false
		case structs.EvalStatusPending:
			pending = true
		}
		if last == nil || ev.CreateIndex > last.CreateIndex {
			last = ev
		}
	}
	if pending {
		return true
	}
	return last != nil && last.Status == structs.EvalStatusComplete && len(last.FailedTGAllocs) > 0
}

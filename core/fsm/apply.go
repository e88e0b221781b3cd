package fsm

import (
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Each applier writes its entry at the entry's Raft index, in one state
// transaction, and returns nil or the state store's error. An entry that
// writes several things (a job, its launch record and its eval; a node
// change and its evals; allocs and the evals they cause) writes them
// together: a reader never sees one without the other, and an entry the
// store refuses half-way writes nothing. The hooks are told after the
// transaction committed, in the order the entry wrote the objects, and see
// the stored objects.

// at is the time an entry's writes are stamped with: the leader's stamp
// (structs.Stamped), or, for an entry written before stamps existed, the
// first of the entry's own times (unix nanoseconds) that is set. With none,
// the zero time: the writes keep the times the objects carry. Never the
// wall clock, which differs on every server and on every replay.
func at(now int64, fallbacks ...int64) time.Time {
	if now != 0 {
		return time.Unix(0, now).UTC()
	}
	for _, n := range fallbacks {
		if n != 0 {
			return time.Unix(0, n).UTC()
		}
	}
	return time.Time{}
}

// nodeStamp is at for node changes: an unstamped entry falls back to its
// node event's time, then to the status time it carries (unix seconds).
func nodeStamp(now int64, ev *structs.NodeEvent, updatedAt int64) time.Time {
	var evTime int64
	if ev != nil && !ev.Timestamp.IsZero() {
		evTime = ev.Timestamp.UnixNano()
	}
	return at(now, evTime, updatedAt*int64(time.Second))
}

func (f *FSM) applyNodeRegister(index uint64, buf []byte) any {
	req := decode[structs.NodeRegisterRequest](structs.NodeRegisterRequestType, index, buf)
	if req.Node == nil {
		return structs.NewError(structs.ErrInvalid, "node register: missing node")
	}
	st := f.State().At(at(req.Now, req.Node.StatusUpdatedAt*int64(time.Second)))
	if err := st.UpsertNode(index, req.Node, req.Evals...); err != nil {
		return err
	}
	f.nodeChanged(req.Node.ID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) applyNodeDeregister(index uint64, buf []byte) any {
	req := decode[structs.NodeDeregisterRequest](structs.NodeDeregisterRequestType, index, buf)
	// Deleting stores no time, so the entry carries none.
	return f.State().DeleteNode(index, req.NodeIDs)
}

func (f *FSM) applyNodeUpdateStatus(index uint64, buf []byte) any {
	req := decode[structs.NodeUpdateStatusRequest](structs.NodeUpdateStatusRequestType, index, buf)
	st := f.State().At(nodeStamp(req.Now, req.NodeEvent, req.UpdatedAt))
	if err := st.UpdateNodeStatus(index, req.NodeID, req.Status, req.UpdatedAt, req.NodeEvent, req.Evals...); err != nil {
		return err
	}
	f.nodeChanged(req.NodeID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) applyNodeUpdateDrain(index uint64, buf []byte) any {
	req := decode[structs.NodeUpdateDrainRequest](structs.NodeUpdateDrainRequestType, index, buf)
	st := f.State().At(nodeStamp(req.Now, req.NodeEvent, req.UpdatedAt))
	err := st.UpdateNodeDrainWithMeta(index, req.NodeID, req.DrainStrategy, req.MarkEligible, req.UpdatedAt, req.NodeEvent, req.Meta, req.Evals...)
	if err != nil {
		return err
	}
	f.nodeChanged(req.NodeID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) applyNodeUpdateEligibility(index uint64, buf []byte) any {
	req := decode[structs.NodeUpdateEligibilityRequest](structs.NodeUpdateEligibilityRequestType, index, buf)
	st := f.State().At(nodeStamp(req.Now, req.NodeEvent, req.UpdatedAt))
	if err := st.UpdateNodeEligibility(index, req.NodeID, req.Eligibility, req.UpdatedAt, req.NodeEvent, req.Evals...); err != nil {
		return err
	}
	f.nodeChanged(req.NodeID, index)
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) nodeChanged(id string, index uint64) {
	if node, err := f.State().NodeByID(nil, id); err == nil && node != nil {
		f.hooks.NodeChanged(node, index)
	}
}

func (f *FSM) applyEvalUpdate(index uint64, buf []byte) any {
	req := decode[structs.EvalUpdateRequest](structs.EvalUpdateRequestType, index, buf)
	st := f.State().At(at(req.Now))
	// An empty list is still a write at this index, so that LatestIndex
	// moves.
	if err := st.UpsertEvals(index, req.Evals); err != nil {
		return err
	}
	f.evalsCommitted(req.Evals)
	return nil
}

func (f *FSM) applyEvalDelete(index uint64, buf []byte) any {
	req := decode[structs.EvalDeleteRequest](structs.EvalDeleteRequestType, index, buf)
	return f.State().DeleteEval(index, req.Evals, req.Allocs)
}

func (f *FSM) applyPlanResults(index uint64, buf []byte) any {
	req := decode[structs.ApplyPlanResultsRequest](structs.ApplyPlanResultsRequestType, index, buf)
	if err := f.State().At(at(req.UpdatedAt)).UpsertPlanResults(index, req); err != nil {
		return err
	}
	if len(req.PreemptionEvals) > 0 {
		f.hooks.EvalsCommitted(req.PreemptionEvals)
	}
	f.evalsCommitted(f.writtenAt(index, req.FollowupEvals))
	return nil
}

// writtenAt returns the stored evals of those given that the entry at
// index wrote: a follow-up eval that an earlier attempt already created
// (and that may have run since) must not reach the broker again.
func (f *FSM) writtenAt(index uint64, evals []*structs.Evaluation) []*structs.Evaluation {
	var out []*structs.Evaluation
	for _, e := range evals {
		if e == nil {
			continue
		}
		if stored, err := f.State().EvalByID(nil, e.ID); err == nil && stored != nil && stored.ModifyIndex == index {
			out = append(out, stored)
		}
	}
	return out
}

func (f *FSM) applyAllocDesiredTransition(index uint64, buf []byte) any {
	req := decode[structs.AllocUpdateDesiredTransitionRequest](structs.AllocUpdateDesiredTransitionRequestType, index, buf)
	var evalTime int64
	if len(req.Evals) > 0 && req.Evals[0] != nil {
		evalTime = req.Evals[0].ModifyTime
	}
	if err := f.State().At(at(req.Now, evalTime)).UpdateAllocsDesiredTransitions(index, req.Allocs, req.Evals); err != nil {
		return err
	}
	if len(req.Evals) > 0 {
		f.hooks.EvalsCommitted(req.Evals)
	}
	return nil
}

func (f *FSM) applySchedulerConfig(index uint64, buf []byte) any {
	req := decode[structs.SchedulerSetConfigRequest](structs.SchedulerConfigRequestType, index, buf)
	return f.State().SchedulerSetConfig(index, &req.Config)
}

// evalsCommitted hands the evals an entry wrote to the hooks. It runs after
// the entry's transaction committed: the state store stamps the very objects
// it stores, so the hooks see their indexes.
func (f *FSM) evalsCommitted(evals []*structs.Evaluation) {
	if len(evals) > 0 {
		f.hooks.EvalsCommitted(evals)
	}
}

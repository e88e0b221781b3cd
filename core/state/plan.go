package state

import (
	"sort"

	"github.com/drover-org/drover/core/structs"
)

// UpsertPlanResults applies a committed plan (§9.3, state side) in one
// write:
//
//   - AllocsStopped are diffs (ID plus what changes) of stored allocs: each
//     becomes desired "stop" with the diff's DesiredDescription, its
//     FollowupEvalID when set, and its ClientStatus and ClientDescription
//     when the server may decide them (lost or unknown; recorded in
//     AllocStates);
//   - AllocsPreempted are diffs that become desired "evict" with
//     "Preempted by alloc ID <id>";
//   - AllocsUpdated are full allocs (new or in-place updates); one without a
//     Job gets req.Job;
//   - PreemptionEvals are written like UpsertEvals;
//   - FollowupEvals are created like UpsertEvals, except one whose ID is
//     already stored, which is left as it is (a retried scheduling attempt
//     names the same follow-up evals, which may have run meanwhile);
//   - AllocFollowups set the FollowupEvalID of stored allocs, after
//     everything above, and change nothing else of them.
//
// Diffs of allocs that no longer exist are skipped. Every alloc goes through
// UpsertAllocs' rules, so the client's fields survive.
func (s *StateStore) UpsertPlanResults(index uint64, req *structs.ApplyPlanResultsRequest) error {
	if req == nil {
		return structs.NewError(structs.ErrInvalid, "plan results: missing request")
	}
	return s.write(index, func(t *writeTxn) error {
		stamp := func(modifyTime int64) int64 {
			switch {
			case modifyTime != 0:
				return modifyTime
			case req.UpdatedAt != 0:
				return req.UpdatedAt
			}
			return t.nanos()
		}
		// The deployment first: the allocs placed in it count in it.
		if req.Deployment != nil {
			if err := t.upsertDeployment(req.Deployment); err != nil {
				return err
			}
		}
		for _, u := range req.DeploymentUpdates {
			if err := t.setDeploymentStatus(u, true); err != nil {
				return err
			}
		}
		all := make([]*structs.Allocation, 0, len(req.AllocsStopped)+len(req.AllocsPreempted)+len(req.AllocsUpdated))
		for _, d := range req.AllocsStopped {
			existing, err := t.alloc(d.ID)
			if err != nil {
				return err
			}
			if existing == nil {
				continue
			}
			c := *existing
			c.DesiredStatus = structs.AllocDesiredStatusStop
			c.DesiredDescription = d.DesiredDescription
			if serverClientStatus(d.ClientStatus) && d.ClientStatus != existing.ClientStatus {
				c.ClientStatus = d.ClientStatus
				c.ClientDescription = d.ClientDescription
				c.AllocStates = appendAllocState(existing.AllocStates, &structs.AllocState{
					Field: "ClientStatus", Value: d.ClientStatus, Time: t.now,
				})
			}
			if d.FollowupEvalID != "" {
				c.FollowupEvalID = d.FollowupEvalID
			}
			c.ModifyTime = stamp(d.ModifyTime)
			all = append(all, &c)
		}
		for _, d := range req.AllocsPreempted {
			existing, err := t.alloc(d.ID)
			if err != nil {
				return err
			}
			if existing == nil {
				continue
			}
			c := *existing
			c.DesiredStatus = structs.AllocDesiredStatusEvict
			c.PreemptedByAllocation = d.PreemptedByAllocation
			c.DesiredDescription = "Preempted by alloc ID " + d.PreemptedByAllocation
			c.ModifyTime = stamp(d.ModifyTime)
			all = append(all, &c)
		}
		updated := len(all)
		for _, a := range req.AllocsUpdated {
			if a != nil && a.Job == nil {
				a.Job = req.Job
			}
			if a != nil && a.Metrics == nil && a.CreateIndex == 0 {
				a.Metrics = req.PlacementMetric
			}
			if a != nil {
				a.ModifyTime = stamp(a.ModifyTime)
			}
			all = append(all, a)
		}
		// New allocs go in ID order (after the stops, which their
		// PreviousAllocation links must follow): neighbouring keys share
		// radix nodes that the transaction then copies once, not per alloc.
		news := all[updated:]
		sort.Slice(news, func(i, j int) bool { return news[i] != nil && news[j] != nil && news[i].ID < news[j].ID })
		if err := t.upsertAllocs(all); err != nil {
			return err
		}
		if len(req.PreemptionEvals) > 0 {
			if err := t.upsertEvals(req.PreemptionEvals); err != nil {
				return err
			}
		}
		if err := t.createFollowupEvals(req.FollowupEvals); err != nil {
			return err
		}
		return t.markFollowups(req.AllocFollowups)
	})
}

// createFollowupEvals writes the evals whose IDs are not stored yet.
func (t *writeTxn) createFollowupEvals(evals []*structs.Evaluation) error {
	var fresh []*structs.Evaluation
	for _, e := range evals {
		if e == nil || e.ID == "" {
			// The server checked every ID; an entry must apply anyway.
			continue
		}
		raw, err := t.first(TableEvals, "id", e.ID)
		if err != nil {
			return err
		}
		if raw == nil {
			fresh = append(fresh, e)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	return t.upsertEvals(fresh)
}

// markFollowups sets the FollowupEvalID of each named alloc that exists.
func (t *writeTxn) markFollowups(marks []*structs.AllocFollowup) error {
	if len(marks) == 0 {
		return nil
	}
	t.tables[TableAllocs] = struct{}{}
	for _, m := range marks {
		if m == nil {
			continue
		}
		existing, err := t.alloc(m.AllocID)
		if err != nil {
			return err
		}
		if existing == nil || existing.FollowupEvalID == m.FollowupEvalID {
			continue
		}
		c := *existing
		c.FollowupEvalID = m.FollowupEvalID
		c.ModifyIndex = t.index
		if err := t.insert(TableAllocs, &c); err != nil {
			return err
		}
	}
	return nil
}

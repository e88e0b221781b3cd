package state

import (
	"github.com/drover-org/drover/core/structs"
)

// UpsertAllocs writes allocations as the server decided them (plan
// results). For an alloc that already exists, what the client is the
// authority on is kept: TaskStates always, ClientStatus and
// ClientDescription unless the server marks the alloc lost or unknown. A nil
// Job is re-attached from the stored alloc; a new alloc must carry its Job
// (the job's current version is used when it does not). CreateIndex is kept,
// ModifyIndex and AllocModifyIndex become index. A replacement
// (PreviousAllocation set) links its predecessor's NextAllocation.
func (s *StateStore) UpsertAllocs(index uint64, allocs []*structs.Allocation) error {
	return s.write(index, func(t *writeTxn) error { return t.upsertAllocs(allocs) })
}

// UpdateAllocsFromClient applies client status updates. Only the fields the
// client owns are taken from each update (ClientStatus, ClientDescription,
// TaskStates, NetworkStatus when set, ModifyTime); everything the server
// decided stays. Updates of
// unknown allocs are skipped: the alloc may have been reaped meanwhile.
func (s *StateStore) UpdateAllocsFromClient(index uint64, allocs []*structs.Allocation) error {
	return s.write(index, func(t *writeTxn) error { return t.updateAllocsFromClient(allocs) })
}

func (t *writeTxn) updateAllocsFromClient(allocs []*structs.Allocation) error {
	t.tables[TableAllocs] = struct{}{}
	for _, u := range allocs {
		if u == nil {
			continue
		}
		existing, err := t.alloc(u.ID)
		if err != nil {
			return err
		}
		if existing == nil {
			continue
		}
		c := *existing
		if u.ClientStatus != "" {
			c.ClientStatus = u.ClientStatus
		}
		c.ClientDescription = u.ClientDescription
		if u.TaskStates != nil {
			c.TaskStates = u.TaskStates
		}
		c.DeploymentStatus = clientHealth(existing, u, t)
		if u.NetworkStatus != nil {
			c.NetworkStatus = u.NetworkStatus
		}
		c.ModifyTime = u.ModifyTime
		if c.ModifyTime == 0 {
			c.ModifyTime = t.nanos()
		}
		c.ModifyIndex = t.index
		if c.ClientStatus != existing.ClientStatus {
			c.AllocStates = appendAllocState(existing.AllocStates, &structs.AllocState{
				Field: "ClientStatus", Value: c.ClientStatus, Time: t.now,
			})
		}
		if err := t.putAlloc(existing, &c); err != nil {
			return err
		}
		if c.ClientTerminalStatus() && !existing.ClientTerminalStatus() {
			if err := t.dropAllocPlugins(&c); err != nil {
				return err
			}
		}
	}
	return nil
}

// UpdateAllocsDesiredTransitions merges desired transitions into allocs
// (drainer migrations, `alloc stop`) and writes the evals that act on them.
// Unknown alloc IDs are skipped.
func (s *StateStore) UpdateAllocsDesiredTransitions(index uint64, m map[string]*structs.DesiredTransition, evals []*structs.Evaluation) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableAllocs] = struct{}{}
		for id, dt := range m {
			if dt == nil {
				continue
			}
			existing, err := t.alloc(id)
			if err != nil {
				return err
			}
			if existing == nil {
				continue
			}
			c := *existing
			c.DesiredTransition = mergeTransition(existing.DesiredTransition, *dt)
			c.ModifyIndex = t.index
			c.ModifyTime = t.stampNanos(existing.ModifyTime)
			if err := t.putAlloc(existing, &c); err != nil {
				return err
			}
		}
		return t.upsertEvals(evals)
	})
}

func (t *writeTxn) upsertAllocs(allocs []*structs.Allocation) error {
	t.tables[TableAllocs] = struct{}{}
	for _, a := range allocs {
		if a == nil || a.ID == "" {
			return structs.NewError(structs.ErrInvalid, "allocation: missing ID")
		}
		existing, err := t.alloc(a.ID)
		if err != nil {
			return err
		}
		if a.Job != nil {
			if a.Namespace == "" {
				a.Namespace = a.Job.Namespace
			}
			if a.JobID == "" {
				a.JobID = a.Job.ID
			}
		}
		if existing == nil {
			a.CreateIndex = t.index
			if a.CreateTime == 0 {
				a.CreateTime = t.nanos()
			}
			if a.ClientStatus == "" {
				a.ClientStatus = structs.AllocClientStatusPending
			}
			if a.DesiredStatus == "" {
				a.DesiredStatus = structs.AllocDesiredStatusRun
			}
			if a.Job == nil {
				if a.Job, err = t.job(a.Namespace, a.JobID); err != nil {
					return err
				}
				if a.Job == nil {
					return structs.NewError(structs.ErrInvalid, "allocation %s: no job given and job %q not found", a.ID, a.JobID)
				}
			}
		} else {
			a.CreateIndex = existing.CreateIndex
			a.CreateTime = existing.CreateTime
			a.TaskStates = existing.TaskStates
			a.NetworkStatus = existing.NetworkStatus
			if !serverClientStatus(a.ClientStatus) {
				a.ClientStatus = existing.ClientStatus
				a.ClientDescription = existing.ClientDescription
			}
			if a.AllocStates == nil {
				a.AllocStates = existing.AllocStates
			}
			if a.Job == nil {
				a.Job = existing.Job
			}
			a.DeploymentStatus = keepHealth(existing, a)
		}
		a.ModifyIndex = t.index
		a.AllocModifyIndex = t.index
		if a.ModifyTime == 0 {
			a.ModifyTime = t.nanos()
		}
		if a.Job, err = t.sharedJob(a.Job); err != nil {
			return err
		}
		if err := t.putAlloc(existing, a); err != nil {
			return err
		}
		if err := t.linkPrevious(a); err != nil {
			return err
		}
	}
	return nil
}

// putAlloc stores a (replacing existing, which may be nil) and accounts for
// it in the job summary and the job status.
func (t *writeTxn) putAlloc(existing, a *structs.Allocation) error {
	if err := t.countAlloc(existing, a); err != nil {
		return err
	}
	if err := t.countDeployment(existing, a); err != nil {
		return err
	}
	if err := t.insert(TableAllocs, a); err != nil {
		return err
	}
	t.touchJob(a.Namespace, a.JobID, false)
	// An allocation that ends on a node that is down or gone (lost) has
	// no client to release its volume claims: they are the watcher's.
	// Its services end with it, whoever reports the end.
	if existing != nil && a.ClientTerminalStatus() && !existing.ClientTerminalStatus() {
		if err := t.deleteServicesBy("alloc", a.ID); err != nil {
			return err
		}
		n, err := t.node(a.NodeID)
		if err != nil {
			return err
		}
		if n == nil || n.TerminalStatus() {
			return t.touchClaimedVolumes(a)
		}
	}
	return nil
}

// sharedJob swaps an alloc's job for the stored object of the same job
// version when there is one. Plans and client updates decode a fresh copy of
// the job for every alloc; sharing one object keeps 100,000 allocations of a
// job from holding 100,000 copies of it.
func (t *writeTxn) sharedJob(j *structs.Job) (*structs.Job, error) {
	if j == nil || j.JobModifyIndex == 0 {
		return j, nil
	}
	same := func(s *structs.Job) bool {
		return s != nil && s.CreateIndex == j.CreateIndex && s.JobModifyIndex == j.JobModifyIndex && s.Version == j.Version
	}
	cur, err := t.job(j.Namespace, j.ID)
	if err != nil {
		return nil, err
	}
	if same(cur) {
		return cur, nil
	}
	raw, err := t.first(TableJobVersions, "id", j.Namespace, j.ID, j.Version)
	if err != nil {
		return nil, err
	}
	if raw != nil && same(raw.(*structs.Job)) {
		return raw.(*structs.Job), nil
	}
	return j, nil
}

// linkPrevious points a replacement's predecessor at it.
func (t *writeTxn) linkPrevious(a *structs.Allocation) error {
	if a.PreviousAllocation == "" {
		return nil
	}
	prev, err := t.alloc(a.PreviousAllocation)
	if err != nil || prev == nil || prev.NextAllocation == a.ID {
		return err
	}
	c := *prev
	c.NextAllocation = a.ID
	c.ModifyIndex = t.index
	return t.insert(TableAllocs, &c)
}

// countAlloc updates the job summary for an alloc moving from existing
// (nil for a new alloc) to a. Only allocs of the current job instance count:
// a purged and re-registered job starts from zero. A new alloc consumes one
// queued placement.
func (t *writeTxn) countAlloc(existing, a *structs.Allocation) error {
	if a.Job == nil {
		return nil
	}
	sum, err := t.summary(a.Namespace, a.JobID)
	if err != nil || sum == nil || a.Job.CreateIndex != sum.CreateIndex {
		return err
	}
	g := sum.Summary[a.TaskGroup]
	switch {
	case existing == nil:
		addStatus(&g, a.ClientStatus, 1)
		if g.Queued > 0 {
			g.Queued--
		}
	case existing.ClientStatus != a.ClientStatus:
		if existing.Job != nil && existing.Job.CreateIndex == sum.CreateIndex {
			addStatus(&g, existing.ClientStatus, -1)
		}
		addStatus(&g, a.ClientStatus, 1)
	default:
		return nil
	}
	sum.Summary[a.TaskGroup] = g
	return nil
}

func addStatus(g *structs.TaskGroupSummary, status string, d int) {
	var p *int
	switch status {
	case structs.AllocClientStatusPending:
		p = &g.Starting
	case structs.AllocClientStatusRunning:
		p = &g.Running
	case structs.AllocClientStatusComplete:
		p = &g.Complete
	case structs.AllocClientStatusFailed:
		p = &g.Failed
	case structs.AllocClientStatusLost:
		p = &g.Lost
	case structs.AllocClientStatusUnknown:
		p = &g.Unknown
	default:
		return
	}
	if *p += d; *p < 0 {
		*p = 0
	}
}

// appendAllocState appends to a copy: the stored slice is shared with
// readers and may have spare capacity.
func appendAllocState(states []*structs.AllocState, s *structs.AllocState) []*structs.AllocState {
	out := make([]*structs.AllocState, 0, len(states)+1)
	return append(append(out, states...), s)
}

// mergeTransition overlays the set fields of upd on cur.
func mergeTransition(cur, upd structs.DesiredTransition) structs.DesiredTransition {
	if upd.Migrate != nil {
		cur.Migrate = upd.Migrate
	}
	if upd.Reschedule != nil {
		cur.Reschedule = upd.Reschedule
	}
	if upd.ForceReschedule != nil {
		cur.ForceReschedule = upd.ForceReschedule
	}
	if upd.NoShutdownDelay != nil {
		cur.NoShutdownDelay = upd.NoShutdownDelay
	}
	return cur
}

// serverClientStatus reports whether the server may set an alloc's client
// status: only to say it lost touch with the client (lost, unknown). Any
// other client status is the client's to report.
func serverClientStatus(status string) bool {
	return status == structs.AllocClientStatusLost || status == structs.AllocClientStatusUnknown
}

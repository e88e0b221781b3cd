package state

import (
	"slices"
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state/schema"
	"github.com/drover-org/drover/core/structs"
)

// TableDeployments holds deployments, by ID and by job.
const TableDeployments = schema.TableDeployments

// The counters of a deployment (PlacedAllocs, PlacedCanaries, HealthyAllocs,
// UnhealthyAllocs, RequireProgressBy) are kept here, by the writes of the
// allocations themselves: every alloc write goes through putAlloc, which
// calls countDeployment. A write changes private copies of the deployments
// it touches (writeTxn.deploys) and stores them once at its end.

// deployment returns the write's private copy of a deployment, or nil.
func (t *writeTxn) deployment(id string) (*structs.Deployment, error) {
	if d, ok := t.deploys[id]; ok {
		return d, nil
	}
	raw, err := t.first(TableDeployments, "id", id)
	if raw == nil || err != nil {
		return nil, err
	}
	c := raw.(*structs.Deployment).Copy()
	if t.deploys == nil {
		t.deploys = map[string]*structs.Deployment{}
	}
	t.deploys[id] = c
	return c, nil
}

// flushDeployments stores the deployments the write changed.
func (t *writeTxn) flushDeployments() error {
	ids := make([]string, 0, len(t.deploys))
	for id := range t.deploys {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		d := t.deploys[id]
		d.ModifyIndex = t.index
		d.ModifyTime = t.stampNanos(d.ModifyTime)
		if err := t.insert(TableDeployments, d); err != nil {
			return err
		}
	}
	return nil
}

// health is an alloc's reported health in its deployment: 0 unknown,
// 1 healthy, -1 unhealthy.
func health(s *structs.AllocDeploymentStatus) int {
	switch {
	case s.IsHealthy():
		return 1
	case s.IsUnhealthy():
		return -1
	}
	return 0
}

// countDeployment accounts for an alloc moving from existing (nil: new) to
// a in the counters of a's deployment.
func (t *writeTxn) countDeployment(existing, a *structs.Allocation) error {
	if a.DeploymentID == "" {
		return nil
	}
	before := existing != nil && existing.DeploymentID == a.DeploymentID
	var was int
	if before {
		was = health(existing.DeploymentStatus)
	}
	now := health(a.DeploymentStatus)
	if before && was == now {
		return nil
	}
	d, err := t.deployment(a.DeploymentID)
	if err != nil || d == nil {
		return err
	}
	st := d.TaskGroups[a.TaskGroup]
	if st == nil {
		return nil
	}
	if !before {
		st.PlacedAllocs++
		if a.DeploymentStatus.IsCanary() && !slices.Contains(st.PlacedCanaries, a.ID) {
			st.PlacedCanaries = append(st.PlacedCanaries, a.ID)
		}
	}
	if was == now {
		return nil
	}
	switch was {
	case 1:
		st.HealthyAllocs = max(0, st.HealthyAllocs-1)
	case -1:
		st.UnhealthyAllocs = max(0, st.UnhealthyAllocs-1)
	}
	switch now {
	case 1:
		st.HealthyAllocs++
		// Progress: the group has until the deadline from now for the
		// next allocation to become healthy.
		if st.ProgressDeadline > 0 && !t.now.IsZero() {
			st.RequireProgressBy = t.now.Add(st.ProgressDeadline)
		}
	case -1:
		st.UnhealthyAllocs++
	}
	return nil
}

// upsertDeployment writes a new deployment (or replaces one). A new one
// cancels every other active deployment of its job.
func (t *writeTxn) upsertDeployment(d *structs.Deployment) error {
	if d == nil || d.ID == "" {
		return structs.NewError(structs.ErrInvalid, "deployment: missing ID")
	}
	existing, err := t.first(TableDeployments, "id", d.ID)
	if err != nil {
		return err
	}
	d = d.Copy()
	if existing != nil {
		d.CreateIndex = existing.(*structs.Deployment).CreateIndex
		d.CreateTime = existing.(*structs.Deployment).CreateTime
	} else {
		d.CreateIndex = t.index
		d.CreateTime = t.stampNanos(d.CreateTime)
		iter, err := t.txn.Get(TableDeployments, "job", d.Namespace, d.JobID)
		if err != nil {
			return err
		}
		var others []string
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			if o := raw.(*structs.Deployment); o.Active() && o.ID != d.ID {
				others = append(others, o.ID)
			}
		}
		for _, id := range others {
			o, err := t.deployment(id)
			if err != nil {
				return err
			}
			o.Status = structs.DeploymentStatusCancelled
			o.StatusDescription = structs.DeploymentStatusDescriptionNewerJob
		}
	}
	if t.deploys == nil {
		t.deploys = map[string]*structs.Deployment{}
	}
	t.deploys[d.ID] = d
	return nil
}

// setDeploymentStatus applies a status update. With lenient, an update of
// an unknown or terminal deployment is skipped (a plan's update of a
// deployment that ended meanwhile); otherwise it is refused.
func (t *writeTxn) setDeploymentStatus(u *structs.DeploymentStatusUpdate, lenient bool) error {
	if u == nil {
		return structs.NewError(structs.ErrInvalid, "deployment status update: missing update")
	}
	if !structs.DeploymentStatusKnown(u.Status) {
		return structs.NewError(structs.ErrInvalid, "deployment status update: Status %q is not a deployment status", u.Status)
	}
	d, err := t.deployment(u.DeploymentID)
	if err != nil {
		return err
	}
	switch {
	case d == nil && lenient:
		return nil
	case d == nil:
		return structs.NewError(structs.ErrNotFound, "deployment %q not found", u.DeploymentID)
	case !d.Active() && lenient:
		return nil
	case !d.Active():
		return structs.NewError(structs.ErrInvalid, "deployment %q is %s: a terminal deployment cannot change status", d.ID, d.Status)
	}
	d.Status, d.StatusDescription = u.Status, u.StatusDescription
	if d.Status == structs.DeploymentStatusSuccessful {
		return t.markJobStable(d.Namespace, d.JobID, d.JobVersion, d.JobCreateIndex)
	}
	return nil
}

// markJobStable sets Stable on a kept job version, and on the job when that
// version is current. Stored jobs are shared and never modified: copies
// replace them.
func (t *writeTxn) markJobStable(ns, id string, version, createIndex uint64) error {
	raw, err := t.first(TableJobVersions, "id", ns, id, version)
	if err != nil {
		return err
	}
	if raw != nil && !raw.(*structs.Job).Stable && raw.(*structs.Job).CreateIndex == createIndex {
		c := *raw.(*structs.Job)
		c.Stable = true
		if err := t.insert(TableJobVersions, &c); err != nil {
			return err
		}
	}
	cur, err := t.job(ns, id)
	if err != nil || cur == nil || cur.Version != version || cur.Stable || cur.CreateIndex != createIndex {
		return err
	}
	c := *cur
	c.Stable = true
	c.ModifyIndex = t.index
	return t.insert(TableJobs, &c)
}

// writeDeploymentExtras writes what a deployment entry carries beyond the
// deployment: the job registered again (auto-revert) and the eval.
func (t *writeTxn) writeDeploymentExtras(job *structs.Job, ev *structs.Evaluation) error {
	if job != nil {
		if err := t.upsertJob(job); err != nil {
			return err
		}
		if ev != nil && ev.JobModifyIndex == 0 {
			ev.JobModifyIndex = t.index
		}
	}
	if ev != nil {
		return t.upsertEvals([]*structs.Evaluation{ev})
	}
	return nil
}

// UpsertDeployment writes a deployment (tests and plan results).
func (s *StateStore) UpsertDeployment(index uint64, d *structs.Deployment) error {
	return s.write(index, func(t *writeTxn) error { return t.upsertDeployment(d) })
}

// UpdateDeploymentStatus applies a DeploymentStatusUpdateRequest: the status
// change (a successful deployment marks its job version Stable), the job
// registered again for an auto-revert, and the eval. Unknown deployments
// are ErrNotFound; terminal ones refuse changes (ErrInvalid).
func (s *StateStore) UpdateDeploymentStatus(index uint64, req *structs.DeploymentStatusUpdateRequest) error {
	return s.write(index, func(t *writeTxn) error {
		if err := t.setDeploymentStatus(req.DeploymentUpdate, false); err != nil {
			return err
		}
		return t.writeDeploymentExtras(req.Job, req.Eval)
	})
}

// UpdateDeploymentPromotion promotes the canaries of every group with
// canaries (All) or of the named groups. Each promoted group must have as
// many healthy canaries as it wants; its canaries stop being canaries.
func (s *StateStore) UpdateDeploymentPromotion(index uint64, req *structs.DeploymentPromoteRequest) error {
	return s.write(index, func(t *writeTxn) error {
		d, err := t.deployment(req.DeploymentID)
		if err != nil {
			return err
		}
		if d == nil {
			return structs.NewError(structs.ErrNotFound, "deployment %q not found", req.DeploymentID)
		}
		if !d.Active() {
			return structs.NewError(structs.ErrInvalid, "deployment %q is %s: a terminal deployment cannot be promoted", d.ID, d.Status)
		}
		groups := req.Groups
		if req.All {
			groups = nil
			for _, g := range d.SortedGroups() {
				if d.TaskGroups[g].DesiredCanaries > 0 {
					groups = append(groups, g)
				}
			}
		}
		if len(groups) == 0 {
			return structs.NewError(structs.ErrInvalid, "deployment %q: no task group to promote (set All or name Groups with canaries)", d.ID)
		}
		for _, g := range groups {
			st := d.TaskGroups[g]
			if st == nil {
				return structs.NewError(structs.ErrInvalid, "deployment %q has no task group %q", d.ID, g)
			}
			if st.DesiredCanaries == 0 {
				return structs.NewError(structs.ErrInvalid, "deployment %q: task group %q has no canaries to promote", d.ID, g)
			}
			healthy := 0
			var canaries []*structs.Allocation
			for _, id := range st.PlacedCanaries {
				a, err := t.alloc(id)
				if err != nil {
					return err
				}
				if a != nil && a.DeploymentStatus.IsHealthy() && !a.TerminalStatus() {
					healthy++
				}
				if a != nil {
					canaries = append(canaries, a)
				}
			}
			if healthy < st.DesiredCanaries {
				return structs.NewError(structs.ErrInvalid, "deployment %q: task group %q has %d/%d healthy canaries: promotion needs all of them healthy",
					d.ID, g, healthy, st.DesiredCanaries)
			}
			st.Promoted = true
			for _, a := range canaries {
				c := *a
				c.DeploymentStatus = a.DeploymentStatus.Copy()
				c.DeploymentStatus.Canary = false
				c.DeploymentStatus.ModifyIndex = t.index
				c.ModifyIndex = t.index
				if err := t.insert(TableAllocs, &c); err != nil {
					return err
				}
			}
		}
		if d.Status == structs.DeploymentStatusRunning {
			d.StatusDescription = structs.DeploymentStatusDescriptionRunning
		}
		return t.writeDeploymentExtras(nil, req.Eval)
	})
}

// UpdateDeploymentAllocHealth sets the health of allocations of a
// deployment (every ID must be an alloc of it), then applies the optional
// status change, auto-revert job and eval.
func (s *StateStore) UpdateDeploymentAllocHealth(index uint64, req *structs.DeploymentAllocHealthRequest) error {
	return s.write(index, func(t *writeTxn) error {
		d, err := t.deployment(req.DeploymentID)
		if err != nil {
			return err
		}
		if d == nil {
			return structs.NewError(structs.ErrNotFound, "deployment %q not found", req.DeploymentID)
		}
		if !d.Active() {
			return structs.NewError(structs.ErrInvalid, "deployment %q is %s: allocation health cannot change", d.ID, d.Status)
		}
		set := func(ids []string, healthy bool) error {
			for _, id := range ids {
				a, err := t.alloc(id)
				if err != nil {
					return err
				}
				if a == nil || a.DeploymentID != d.ID {
					return structs.NewError(structs.ErrInvalid, "allocation %q is not an allocation of deployment %q", id, d.ID)
				}
				c := *a
				c.DeploymentStatus = a.DeploymentStatus.Copy()
				if c.DeploymentStatus == nil {
					c.DeploymentStatus = &structs.AllocDeploymentStatus{}
				}
				h := healthy
				c.DeploymentStatus.Healthy = &h
				c.DeploymentStatus.Timestamp = t.now
				c.DeploymentStatus.ModifyIndex = t.index
				c.ModifyIndex = t.index
				if err := t.putAlloc(a, &c); err != nil {
					return err
				}
			}
			return nil
		}
		if err := set(req.HealthyAllocationIDs, true); err != nil {
			return err
		}
		if err := set(req.UnhealthyAllocationIDs, false); err != nil {
			return err
		}
		t.tables[TableAllocs] = struct{}{}
		if req.DeploymentUpdate != nil {
			if err := t.setDeploymentStatus(req.DeploymentUpdate, false); err != nil {
				return err
			}
		}
		return t.writeDeploymentExtras(req.Job, req.Eval)
	})
}

// DeleteDeployments removes deployments (the GC); unknown IDs are skipped.
func (s *StateStore) DeleteDeployments(index uint64, ids []string) error {
	return s.write(index, func(t *writeTxn) error {
		t.tables[TableDeployments] = struct{}{}
		for _, id := range ids {
			raw, err := t.first(TableDeployments, "id", id)
			if err != nil {
				return err
			}
			if raw != nil {
				if err := t.delete(TableDeployments, raw); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// DeploymentByID returns a deployment, or nil.
func (s *StateStore) DeploymentByID(ws memdb.WatchSet, id string) (*structs.Deployment, error) {
	return first[*structs.Deployment](s, ws, TableDeployments, "id", id)
}

// DeploymentsByIDPrefix returns the deployments of ns (every namespace for
// AllNamespaces or "") whose ID starts with prefix, in ID order.
func (s *StateStore) DeploymentsByIDPrefix(ws memdb.WatchSet, ns, prefix string) ([]*structs.Deployment, error) {
	return list(s, ws, inNamespace(ns, func(d *structs.Deployment) string { return d.Namespace }), TableDeployments, "id_prefix", prefix)
}

// DeploymentsByJob returns a job's deployments, newest first.
func (s *StateStore) DeploymentsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Deployment, error) {
	out, err := list[*structs.Deployment](s, ws, nil, TableDeployments, "job", ns, jobID)
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex > out[j].CreateIndex })
	return out, nil
}

// LatestDeploymentByJob returns the job's most recently created deployment,
// or nil.
func (s *StateStore) LatestDeploymentByJob(ws memdb.WatchSet, ns, jobID string) (*structs.Deployment, error) {
	all, err := s.DeploymentsByJob(ws, ns, jobID)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	return all[0], nil
}

// ActiveDeployments returns every deployment that is not terminal.
func (s *StateStore) ActiveDeployments(ws memdb.WatchSet) ([]*structs.Deployment, error) {
	return list(s, ws, (*structs.Deployment).Active, TableDeployments, "id")
}

// AllocsByDeployment returns the allocations placed in a deployment.
func (s *StateStore) AllocsByDeployment(ws memdb.WatchSet, d *structs.Deployment) ([]*structs.Allocation, error) {
	return list(s, ws, func(a *structs.Allocation) bool { return a.DeploymentID == d.ID }, TableAllocs, "job", d.Namespace, d.JobID)
}

// clientHealth is the deployment status of an alloc after a client update
// u: the client reports health only (Healthy and Timestamp), in the
// alloc's deployment or, outside one, per its group's migrate block; the
// server's part (Canary) stays.
func clientHealth(existing, u *structs.Allocation, t *writeTxn) *structs.AllocDeploymentStatus {
	cur := existing.DeploymentStatus
	if !u.DeploymentStatus.HasHealth() {
		return cur
	}
	if cur.HasHealth() && *cur.Healthy == *u.DeploymentStatus.Healthy {
		return cur
	}
	c := cur.Copy()
	if c == nil {
		c = &structs.AllocDeploymentStatus{}
	}
	h := *u.DeploymentStatus.Healthy
	c.Healthy = &h
	c.Timestamp = u.DeploymentStatus.Timestamp
	if !t.now.IsZero() {
		c.Timestamp = t.now
	}
	c.ModifyIndex = t.index
	return c
}

// keepHealth keeps the health reported for an alloc that the server writes
// again (an in-place update built from an older read) in the same
// deployment.
func keepHealth(existing, a *structs.Allocation) *structs.AllocDeploymentStatus {
	if existing.DeploymentID != a.DeploymentID || !existing.DeploymentStatus.HasHealth() || a.DeploymentStatus.HasHealth() {
		return a.DeploymentStatus
	}
	c := a.DeploymentStatus.Copy()
	if c == nil {
		c = &structs.AllocDeploymentStatus{}
	}
	c.Healthy = existing.DeploymentStatus.Copy().Healthy
	c.Timestamp = existing.DeploymentStatus.Timestamp
	c.ModifyIndex = existing.DeploymentStatus.ModifyIndex
	return c
}

// reapDeployments deletes the GC's deployments that are still at their
// decided index, terminal, and without a live allocation.
func (g *gcTxn) reapDeployments(refs []structs.GCRef) error {
	t := g.t
	for _, r := range refs {
		raw, err := t.first(TableDeployments, "id", r.ID)
		if err != nil {
			return err
		}
		if raw == nil {
			g.skip()
			continue
		}
		d := raw.(*structs.Deployment)
		if d.ModifyIndex != r.ModifyIndex || d.Active() {
			g.skip()
			continue
		}
		live := false
		iter, err := t.txn.Get(TableAllocs, "job", d.Namespace, d.JobID)
		if err != nil {
			return err
		}
		for obj := iter.Next(); obj != nil; obj = iter.Next() {
			if a := obj.(*structs.Allocation); a.DeploymentID == d.ID && !a.ClientTerminalStatus() {
				live = true
				break
			}
		}
		if live {
			g.skip()
			continue
		}
		if err := t.delete(TableDeployments, d); err != nil {
			return err
		}
		g.out.Deployments++
	}
	return nil
}

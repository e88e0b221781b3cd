package state

import (
	"github.com/drover-org/drover/core/structs"
)

// GCReap applies a garbage collection entry (structs.GCReapRequest): it
// deletes each named object that is still at the modify index the leader
// decided it at and still meets the floor the request documents, checked
// against the state as the entry applies, and skips the others. Nothing the
// request names makes it fail: an object gone, moved or no longer eligible
// is counted in Skipped. Only a request over its bounds is refused
// (structs.ErrInvalid), writing nothing; the leader never proposes one.
//
// Tokens are expired relative to the handle's time (see At); without one
// none is deleted.
func (s *StateStore) GCReap(index uint64, req *structs.GCReapRequest) (*structs.GCReapResponse, error) {
	if req == nil {
		req = &structs.GCReapRequest{}
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	out := &structs.GCReapResponse{}
	err := s.write(index, func(t *writeTxn) error {
		*out = structs.GCReapResponse{}
		g := &gcTxn{t: t, out: out}
		return g.reap(req)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

type gcTxn struct {
	t   *writeTxn
	out *structs.GCReapResponse
}

func (g *gcTxn) skip() { g.out.Skipped++ }

func (g *gcTxn) reap(req *structs.GCReapRequest) error {
	t := g.t
	// Decide everything against the state before the entry, then delete:
	// a job's modify index must be compared before deleting its children
	// can settle its status again.
	allocs := map[string]*structs.Allocation{}
	for _, r := range req.Allocs {
		a, err := t.alloc(r.ID)
		if err != nil {
			return err
		}
		if a == nil || a.ModifyIndex != r.ModifyIndex || !a.ClientTerminalStatus() || allocs[a.ID] != nil {
			g.skip()
			continue
		}
		allocs[a.ID] = a
	}
	evals := map[string]*structs.Evaluation{}
	for _, r := range req.Evals {
		raw, err := t.first(TableEvals, "id", r.ID)
		if err != nil {
			return err
		}
		if raw == nil || evals[r.ID] != nil {
			g.skip()
			continue
		}
		e := raw.(*structs.Evaluation)
		if e.ModifyIndex != r.ModifyIndex || !e.TerminalStatus() {
			g.skip()
			continue
		}
		ok, err := g.allGone(TableAllocs, "eval", allocs, nil, e.ID)
		if err != nil {
			return err
		}
		if !ok {
			g.skip()
			continue
		}
		evals[e.ID] = e
	}
	var jobs []*structs.Job
	seenJob := map[nsKey]bool{}
	for _, r := range req.Jobs {
		j, err := t.job(r.Namespace, r.ID)
		if err != nil {
			return err
		}
		k := nsKey{r.Namespace, r.ID}
		if j == nil || seenJob[k] || j.ModifyIndex != r.ModifyIndex || (j.Status != structs.JobStatusDead && !j.Stop) {
			g.skip()
			continue
		}
		okAllocs, err := g.allGone(TableAllocs, "job", allocs, nil, j.Namespace, j.ID)
		if err != nil {
			return err
		}
		okEvals, err := g.allGone(TableEvals, "job", nil, evals, j.Namespace, j.ID)
		if err != nil {
			return err
		}
		if !okAllocs || !okEvals {
			g.skip()
			continue
		}
		seenJob[k] = true
		jobs = append(jobs, j)
	}
	var nodes []*structs.Node
	seenNode := map[string]bool{}
	for _, r := range req.Nodes {
		n, err := t.node(r.ID)
		if err != nil {
			return err
		}
		if n == nil || seenNode[n.ID] || n.ModifyIndex != r.ModifyIndex || n.Status != structs.NodeStatusDown {
			g.skip()
			continue
		}
		live, err := g.liveAllocsOn(n.ID)
		if err != nil {
			return err
		}
		if live {
			g.skip()
			continue
		}
		seenNode[n.ID] = true
		nodes = append(nodes, n)
	}

	// Deletes, children first.
	for _, r := range req.Allocs {
		a := allocs[r.ID]
		if a == nil {
			continue
		}
		delete(allocs, r.ID)
		if err := t.delete(TableAllocs, a); err != nil {
			return err
		}
		if err := t.deleteServicesBy("alloc", a.ID); err != nil {
			return err
		}
		// A claim it still holds is the volume watcher's now.
		if err := t.touchClaimedVolumes(a); err != nil {
			return err
		}
		t.touchJobReaped(a.Namespace, a.JobID)
		g.out.Allocs++
	}
	for _, r := range req.Evals {
		e := evals[r.ID]
		if e == nil {
			continue
		}
		delete(evals, r.ID)
		if err := t.delete(TableEvals, e); err != nil {
			return err
		}
		t.touchJobReaped(e.Namespace, e.JobID)
		g.out.Evals++
	}
	for _, j := range jobs {
		if err := t.deleteJob(j.Namespace, j.ID); err != nil {
			return err
		}
		g.out.Jobs++
		g.out.DeletedJobs = append(g.out.DeletedJobs, structs.NamespacedID{Namespace: j.Namespace, ID: j.ID})
	}
	for _, n := range nodes {
		if err := t.delete(TableNodes, n); err != nil {
			return err
		}
		if err := t.touchNodeClaims(n.ID); err != nil {
			return err
		}
		if err := t.dropNodePlugins(n); err != nil {
			return err
		}
		g.out.Nodes++
	}
	if err := g.reapPlugins(req.CSIPlugins); err != nil {
		return err
	}
	if err := g.reapOneTimeTokens(req.OneTimeTokens); err != nil {
		return err
	}
	if err := g.reapDeployments(req.Deployments); err != nil {
		return err
	}
	return g.reapACLTokens(req.ACLTokens)
}

// allGone reports whether every object of table under index args is
// reaped by this entry (in allocs or evals, whichever table is).
func (g *gcTxn) allGone(table, index string, allocs map[string]*structs.Allocation, evals map[string]*structs.Evaluation, args ...any) (bool, error) {
	iter, err := g.t.txn.Get(table, index, args...)
	if err != nil {
		return false, err
	}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		switch o := raw.(type) {
		case *structs.Allocation:
			if allocs[o.ID] == nil {
				return false, nil
			}
		case *structs.Evaluation:
			if evals[o.ID] == nil {
				return false, nil
			}
		}
	}
	return true, nil
}

// liveAllocsOn reports whether an allocation on the node has a client
// status that is not terminal.
func (g *gcTxn) liveAllocsOn(nodeID string) (bool, error) {
	// Both halves of the index: a server-terminal alloc (desired stop) may
	// still run on its client.
	for _, terminal := range []bool{false, true} {
		iter, err := g.t.txn.Get(TableAllocs, "node_terminal", nodeID, terminal)
		if err != nil {
			return false, err
		}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			if !raw.(*structs.Allocation).ClientTerminalStatus() {
				return true, nil
			}
		}
	}
	return false, nil
}

func (g *gcTxn) reapPlugins(refs []structs.GCRef) error {
	t := g.t
	for _, r := range refs {
		p, err := t.csiPlugin(r.ID)
		if err != nil {
			return err
		}
		if p == nil || p.ModifyIndex != r.ModifyIndex || !p.IsEmpty() {
			g.skip()
			continue
		}
		vol, err := t.first(TableCSIVolumes, "plugin_id", r.ID)
		if err != nil {
			return err
		}
		running, err := g.jobRunsPlugin(r.ID)
		if err != nil {
			return err
		}
		if vol != nil || running {
			g.skip()
			continue
		}
		if err := t.delete(TableCSIPlugins, p); err != nil {
			return err
		}
		g.out.CSIPlugins++
	}
	return nil
}

func (g *gcTxn) reapOneTimeTokens(refs []structs.GCRef) error {
	t := g.t
	for _, r := range refs {
		raw, err := t.first(TableOneTimeTokens, "id", r.ID)
		if err != nil {
			return err
		}
		if raw == nil || t.now.IsZero() {
			g.skip()
			continue
		}
		o := raw.(*structs.OneTimeToken)
		if o.ModifyIndex != r.ModifyIndex || !o.IsExpired(t.now) {
			g.skip()
			continue
		}
		if err := t.delete(TableOneTimeTokens, o); err != nil {
			return err
		}
		g.out.OneTimeTokens++
	}
	return nil
}

func (g *gcTxn) reapACLTokens(refs []structs.GCRef) error {
	t := g.t
	for _, r := range refs {
		raw, err := t.first(TableACLTokens, "id", r.ID)
		if err != nil {
			return err
		}
		if raw == nil || t.now.IsZero() {
			g.skip()
			continue
		}
		tok := raw.(*structs.ACLToken)
		if tok.ModifyIndex != r.ModifyIndex || !tok.IsExpired(t.now) {
			g.skip()
			continue
		}
		if err := t.delete(TableACLTokens, tok); err != nil {
			return err
		}
		g.out.ACLTokens++
	}
	return nil
}

// jobRunsPlugin reports whether a job that is not stopped runs the plugin:
// it expects instances even before they are placed.
func (g *gcTxn) jobRunsPlugin(id string) (bool, error) {
	iter, err := g.t.txn.Get(TableJobs, "csi_plugin", id)
	if err != nil {
		return false, err
	}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		if !raw.(*structs.Job).Stop {
			return true, nil
		}
	}
	return false, nil
}

package gcengine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// applier writes one run's plans: its reap entries, pipelined while the
// cluster is idle (Pacing.IdleInFlight), and its claim releases.
type applier struct {
	g    *Engine
	pace *Pacer
	st   *Stats
	// inflight are the reap entries proposed and not yet answered, in
	// log order.
	inflight []proposed
}

// proposed is a reap entry in flight.
type proposed struct {
	n     int // objects
	start time.Time
	wait  func() (uint64, any, error)
}

// apply writes what Decide planned for one page: the reaps, then the
// releases.
func (a *applier) apply(ctx context.Context, plan Plan) error {
	if err := a.reap(ctx, plan.Reap); err != nil {
		return err
	}
	return a.release(ctx, plan.Release)
}

// reap proposes items as GCReap entries, in order, pausing before each:
// the pause decides whether the step is an idle one (Pacer.Wait), and so
// how many objects its entry holds (at most BatchObjects and BatchJobs
// jobs) and how many entries may be in flight. A busy step has none in
// flight when it proposes, and waits for its own.
func (a *applier) reap(ctx context.Context, items []Item) error {
	g, pace := a.g, a.pace
	for len(items) > 0 {
		if err := pace.Wait(ctx); err != nil {
			return err
		}
		depth := 1
		if pace.Idle() && g.cfg.Propose != nil {
			depth = g.pacing.IdleInFlight
		}
		for len(a.inflight) >= depth {
			if err := a.settle(); err != nil {
				return err
			}
		}
		req, n := g.cut(items, pace.entrySize())
		items = items[n:]
		if req.Len() == 0 {
			continue // kinds no entry carries
		}
		if err := req.Validate(); err != nil {
			return err // a bug in the batching; never proposed
		}
		if err := a.propose(req); err != nil {
			return err
		}
		if depth == 1 {
			if err := a.settle(); err != nil {
				return err
			}
		}
	}
	return nil
}

// propose hands one reap entry to Raft: through Propose, left in flight,
// or through Apply, answered at once (kept in flight already answered).
func (a *applier) propose(req *structs.GCReapRequest) error {
	start := time.Now()
	if a.g.cfg.Propose != nil {
		wait, err := a.g.cfg.Propose(structs.GCReapRequestType, req)
		if err != nil {
			return fmt.Errorf("gc: reap: %w", err)
		}
		a.inflight = append(a.inflight, proposed{n: req.Len(), start: start, wait: wait})
		return nil
	}
	idx, resp, err := a.g.cfg.Apply(structs.GCReapRequestType, req)
	a.inflight = append(a.inflight, proposed{n: req.Len(), start: start, wait: func() (uint64, any, error) { return idx, resp, err }})
	return nil
}

// settle waits for the oldest entry in flight and counts what it did.
func (a *applier) settle() error {
	e := a.inflight[0]
	a.inflight = a.inflight[1:]
	_, resp, err := e.wait()
	took := time.Since(e.start)
	a.g.trace("entry", e.start)
	a.pace.Took(took)
	if err != nil {
		return fmt.Errorf("gc: reap: %w", err)
	}
	a.st.Entries++
	if r, ok := resp.(*structs.GCReapResponse); ok {
		// Sized by the time the entry held the state machine, not its
		// commit: the commit adds the log's write and the queue, which
		// do not grow with the entry and would shrink every entry to
		// the floor.
		a.pace.size.committed(e.n, r.Apply)
		a.st.Reaped += r.Reaped()
		a.st.Skipped += r.Skipped
	}
	return nil
}

// settleAll waits for every entry in flight, and returns the first error
// after counting the rest.
func (a *applier) settleAll() error {
	var first error
	for len(a.inflight) > 0 {
		if err := a.settle(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// cut takes the first entry off items: size objects at most (one at
// least), and BatchJobs jobs. It returns the entry and how many items it
// took.
func (g *Engine) cut(items []Item, size int) (*structs.GCReapRequest, int) {
	size = max(size, 1)
	req := &structs.GCReapRequest{}
	n := 0
	for _, it := range items {
		if n >= size || (it.Kind == gcpb.ObjectKind_OBJECT_KIND_JOB && len(req.Jobs) >= g.pacing.BatchJobs) {
			break
		}
		n++
		switch it.Kind {
		case gcpb.ObjectKind_OBJECT_KIND_ALLOC:
			req.Allocs = append(req.Allocs, it.Ref)
		case gcpb.ObjectKind_OBJECT_KIND_EVAL:
			req.Evals = append(req.Evals, it.Ref)
		case gcpb.ObjectKind_OBJECT_KIND_JOB:
			req.Jobs = append(req.Jobs, it.Ref)
		case gcpb.ObjectKind_OBJECT_KIND_NODE:
			req.Nodes = append(req.Nodes, it.Ref)
		case gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN:
			req.CSIPlugins = append(req.CSIPlugins, it.Ref)
		case gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN:
			req.OneTimeTokens = append(req.OneTimeTokens, it.Ref)
		case gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN:
			req.ACLTokens = append(req.ACLTokens, it.Ref)
		case gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT:
			req.Deployments = append(req.Deployments, it.Ref)
		}
	}
	return req, n
}

// release marks the claims the plugin released, one entry per volume: a
// GC pseudo-claim moves each to the volume's past claims and wakes the
// volume watcher, which unpublishes and frees it. Each volume is re-checked
// first: still at the decided index, and each claim's allocation gone or
// client-terminal. A volume gone since is skipped, not an error.
func (a *applier) release(ctx context.Context, releases []Release) error {
	g, pace, st := a.g, a.pace, a.st
	for _, r := range releases {
		claims := r.Claims
		store := g.cfg.State()
		cur, err := store.CSIVolumeRaw(nil, r.Namespace, r.VolumeID)
		if err != nil {
			return err
		}
		if cur == nil || cur.ModifyIndex != r.Index {
			st.Skipped += len(claims)
			continue
		}
		kept := claims[:0]
		for _, c := range claims {
			a, err := store.AllocByID(nil, c.Claim.AllocationID)
			if err != nil {
				return err
			}
			if a != nil && !a.ClientTerminalStatus() {
				st.Skipped++
				continue
			}
			kept = append(kept, c)
		}
		if len(kept) == 0 {
			continue
		}
		if err := pace.Wait(ctx); err != nil {
			return err
		}
		start := time.Now()
		_, _, err = g.cfg.Apply(structs.CSIVolumeClaimBatchRequestType, &structs.CSIVolumeClaimBatchRequest{Claims: kept})
		pace.Took(time.Since(start))
		switch {
		case errors.Is(err, structs.ErrNotFound):
			st.Skipped += len(kept) // deleted since the check
		case err != nil:
			return fmt.Errorf("gc: release claims of volume %s: %w", r.VolumeID, err)
		default:
			st.Entries++
			st.Released += len(kept)
		}
	}
	return nil
}

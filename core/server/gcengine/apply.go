package gcengine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// apply writes what Decide planned for one page: the reaps, then the
// releases.
func (g *Engine) apply(ctx context.Context, plan Plan, pace *Pacer, st *Stats) error {
	if err := g.reap(ctx, plan.Reap, pace, st); err != nil {
		return err
	}
	return g.release(ctx, plan.Release, pace, st)
}

// reap proposes items as GCReap entries, in order, pausing before each:
// the pause decides whether the step is an idle one (Pacer.Wait), and so
// how many objects its entry holds (at most BatchObjects and BatchJobs
// jobs).
func (g *Engine) reap(ctx context.Context, items []Item, pace *Pacer, st *Stats) error {
	for len(items) > 0 {
		if err := pace.Wait(ctx); err != nil {
			return err
		}
		req, n := g.cut(items, pace.entrySize())
		items = items[n:]
		if req.Len() == 0 {
			continue // kinds no entry carries
		}
		if err := req.Validate(); err != nil {
			return err // a bug in the batching; never proposed
		}
		start := time.Now()
		_, resp, err := g.cfg.Apply(structs.GCReapRequestType, req)
		took := time.Since(start)
		g.trace("entry", start)
		pace.Took(took)
		if err != nil {
			return fmt.Errorf("gc: reap: %w", err)
		}
		st.Entries++
		if r, ok := resp.(*structs.GCReapResponse); ok {
			// Sized by the time the entry held the state machine, not
			// its commit: the commit adds the log's write and the
			// queue, which do not grow with the entry and would shrink
			// every entry to the floor.
			pace.size.committed(req.Len(), r.Apply)
			st.Reaped += r.Reaped()
			st.Skipped += r.Skipped
		}
	}
	return nil
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
func (g *Engine) release(ctx context.Context, releases []Release, pace *Pacer, st *Stats) error {
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

package client

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// minWatchPace spaces Allocs calls that return no news, in case a server
// answers a blocking query without blocking: the watch must not spin.
const minWatchPace = 50 * time.Millisecond

// watchAllocs follows the node's allocations with blocking queries and
// reconciles the runners with each new answer.
func (c *Client) watchAllocs(ctx context.Context) {
	var index uint64
	fails := 0
	for {
		began := time.Now()
		allocs, idx, err := c.cfg.Server.Allocs(ctx, c.nodeID, c.secretID, index, c.cfg.AllocWatchWait)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			wait := c.retryDelay(fails)
			c.logger.Warn("failed to watch allocations; retrying", "error", err, "retry_in", wait)
			if !waitOrDone(ctx, wait) {
				return
			}
			continue
		}
		fails = 0
		unchanged := idx == index && index != 0
		// An index that went backwards means the servers lost or reset
		// their state; start over from what they have now.
		index = idx
		if unchanged {
			if d := minWatchPace - time.Since(began); d > 0 && !waitOrDone(ctx, d) {
				return
			}
			continue
		}
		c.reconcile(allocs)
	}
}

// reconcile brings the runners in line with the server's view: new allocs
// get a runner, changed ones are updated (a desired stop or evict stops
// them), and runners whose alloc the server no longer lists are destroyed.
func (c *Client) reconcile(allocs []*structs.Allocation) {
	c.mu.Lock()
	if c.shutdown || c.destroying {
		c.mu.Unlock()
		return
	}
	seen := make(map[string]bool, len(allocs))
	var updates []func()
	var added []*structs.Allocation
	for _, a := range allocs {
		if a == nil || a.ID == "" {
			continue
		}
		seen[a.ID] = true
		r, ok := c.runners[a.ID]
		if ok {
			cur := r.allocSnapshot()
			if a.AllocModifyIndex > cur.AllocModifyIndex || a.DesiredStatus != cur.DesiredStatus {
				updates = append(updates, func() { r.update(a) })
			}
			continue
		}
		// An alloc that is over, on either side, is never started: either
		// it ran here before (its runner was collected) or the server
		// stopped it before this client saw it.
		if a.TerminalStatus() {
			continue
		}
		added = append(added, a)
	}
	var removed []*allocRunner
	for id, r := range c.runners {
		if !seen[id] {
			removed = append(removed, r)
			delete(c.runners, id)
		}
	}
	c.mu.Unlock()

	for _, f := range updates {
		f()
	}
	for _, a := range added {
		c.logger.Info("starting allocation", "alloc_id", a.ID, "job_id", a.JobID, "group", a.TaskGroup)
		c.addRunner(a, nil)
	}
	for _, r := range removed {
		c.destroyRunner(r)
	}
}

// addRunner creates and starts the runner of an alloc; prior is the state
// of an earlier client process, if any.
func (c *Client) addRunner(a *structs.Allocation, prior *persistedAlloc) {
	r := newAllocRunner(c.ctx, c.rcfg, a, prior)
	// A new alloc is persisted by its run loop before anything else, so
	// that the watch loop does not wait for the disk once per alloc and
	// the first writes of a burst of allocs share their fsyncs.
	r.persistFirst = prior == nil
	c.mu.Lock()
	if c.shutdown || c.destroying {
		c.mu.Unlock()
		r.cancel()
		return
	}
	c.runners[a.ID] = r
	c.mu.Unlock()
	c.goFunc(r.run)
}

// destroyRunner kills the alloc's tasks, then removes its directory and
// state. A client shutdown meanwhile leaves both, and the next client
// process, restoring the runner, finds the alloc gone and destroys it.
func (c *Client) destroyRunner(r *allocRunner) {
	c.logger.Info("destroying allocation", "alloc_id", r.id)
	r.destroy()
	c.goFunc(func() {
		select {
		case <-r.done():
		case <-c.ctx.Done():
			return
		}
		if c.ctx.Err() != nil || !r.allDone() {
			return
		}
		if r.hostVols.held() {
			c.logger.Warn("keeping alloc dir: a host volume may still be mounted in it", "alloc_id", r.id)
			return
		}
		// Whatever the records say, a mount left beneath the dir
		// keeps it: removing it would empty the mounted volume.
		if ms, err := mountsBeneath(r.dir.root); err != nil || len(ms) > 0 {
			c.logger.Error("keeping alloc dir: something is still mounted in it", "alloc_id", r.id, "mounts", ms, "error", err)
			return
		}
		if r.vols.Held() {
			// A task bind mount may remain: removing the dir would
			// empty the volume. The release retry unmounts it.
			c.logger.Warn("keeping alloc dir: a CSI volume may still be mounted in it", "alloc_id", r.id)
			return
		}
		r.mu.Lock()
		r.removed = true
		r.mu.Unlock()
		if err := r.dir.destroy(); err != nil {
			c.logger.Warn("failed to remove alloc dir", "alloc_id", r.id, "error", err)
		}
		if err := c.state.deleteAlloc(r.id); err != nil {
			c.logger.Warn("failed to remove alloc state", "alloc_id", r.id, "error", err)
		}
		r.cancel()
	})
}

// runner returns the runner of an alloc, or nil.
func (c *Client) runner(allocID string) *allocRunner {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runners[allocID]
}

// AllocNamespace returns the namespace of an allocation this client runs,
// for the ACL check of its log endpoint; false when it runs no such alloc.
func (c *Client) AllocNamespace(allocID string) (string, bool) {
	r := c.runner(allocID)
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alloc.Namespace, true
}

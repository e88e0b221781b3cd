// Package blockedevals is the leader's tracker of blocked evaluations: evals
// whose scheduler could not place everything and that are worth retrying
// only once capacity changes.
//
// Three kinds of blocked eval are told apart by what can unblock them:
//   - pinned (NodeID set, from the system and sysbatch schedulers): the named
//     node lacked capacity, so only a change on that node (UnblockNode)
//     releases it;
//   - escaped (EscapedComputedClass): the job's constraints could not be
//     summarised by computed node class, so any capacity change releases it;
//   - captured (the rest): released by a change in a class the scheduler
//     found eligible, or in a class it never saw (ClassEligibility has no
//     entry for it, e.g. a node that joined later).
//
// Released evals go to the eval broker as copies with Status pending, so a
// worker schedules them; the blocked eval in state is left as it is, and the
// scheduler's own eval update closes it.
//
// Like the broker, the tracker lives only on the leader: SetEnabled(false)
// forgets everything and the next leader re-blocks from state.
package blockedevals

import (
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// Enqueuer receives released evals; the eval broker implements it.
type Enqueuer interface {
	Enqueue(ev *structs.Evaluation)
}

// batchEnqueuer is used instead of Enqueue when the Enqueuer offers it, so
// that a large release takes the broker's lock once.
type batchEnqueuer interface {
	EnqueueAll(evs []*structs.Evaluation)
}

// jobKey identifies a job across namespaces.
type jobKey struct{ ns, id string }

// tracked is one blocked eval.
type tracked struct {
	eval  *structs.Evaluation
	token string // the broker token of the delivery that reblocked it, if any
}

func (t *tracked) job() jobKey { return jobKey{t.eval.Namespace, t.eval.JobID} }

// BlockedEvals tracks blocked evals. All methods are safe for concurrent
// use; none blocks on anything but its own short lock and the Enqueuer.
type BlockedEvals struct {
	broker Enqueuer
	logger hclog.Logger

	mu      sync.Mutex
	enabled bool

	byID     map[string]*tracked
	byJob    map[jobKey]map[string]*tracked // job -> NodeID ("" unless pinned) -> eval
	captured map[string]*tracked
	escaped  map[string]*tracked
	byNode   map[string]map[string]*tracked // NodeID -> eval ID -> pinned eval

	classUnblocks indexHistory
	nodeUnblocks  indexHistory
	allUnblock    uint64 // index of the latest UnblockAll

	duplicates []*structs.Evaluation
}

// New returns a disabled tracker that releases evals into broker.
func New(broker Enqueuer, logger hclog.Logger) *BlockedEvals {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	b := &BlockedEvals{broker: broker, logger: logger}
	b.resetLocked()
	return b
}

func (b *BlockedEvals) resetLocked() {
	b.byID = make(map[string]*tracked)
	b.byJob = make(map[jobKey]map[string]*tracked)
	b.captured = make(map[string]*tracked)
	b.escaped = make(map[string]*tracked)
	b.byNode = make(map[string]map[string]*tracked)
	b.classUnblocks = newIndexHistory(classHistoryLimit)
	b.nodeUnblocks = newIndexHistory(nodeHistoryLimit)
	b.allUnblock = 0
	b.duplicates = nil
}

// SetEnabled turns tracking on or off; off forgets every blocked eval, the
// unblock history and the pending duplicates.
func (b *BlockedEvals) SetEnabled(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.enabled == on {
		return
	}
	b.enabled = on
	if !on {
		n := len(b.byID)
		b.resetLocked()
		b.logger.Debug("blocked evals disabled", "evals_dropped", n)
	}
}

// Enabled reports whether the tracker is on.
func (b *BlockedEvals) Enabled() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.enabled
}

// Block tracks a blocked eval. Only the newest (highest CreateIndex) blocked
// eval of a job is kept, per node for pinned evals; the older one becomes a
// duplicate for the leader to cancel. An eval that missed an unblock while
// it was being scheduled (an unblock of a relevant class or node at an index
// above its SnapshotIndex) is released at once instead.
func (b *BlockedEvals) Block(ev *structs.Evaluation) { b.block(ev, "") }

// Reblock is Block for an eval that a worker is still holding from the
// broker under token (a blocked eval that was released, scheduled, and still
// could not place everything). Releasing it before the worker acks is safe:
// the broker delivers an eval re-enqueued while outstanding after its ack.
func (b *BlockedEvals) Reblock(ev *structs.Evaluation, token string) { b.block(ev, token) }

func (b *BlockedEvals) block(ev *structs.Evaluation, token string) {
	if ev == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	if release := b.blockLocked(&tracked{eval: ev, token: token}); release != nil {
		b.logger.Debug("blocked eval missed an unblock; releasing at once",
			"eval_id", ev.ID, "job_id", ev.JobID, "snapshot_index", ev.SnapshotIndex)
		b.enqueueLocked([]*structs.Evaluation{release})
	}
}

// blockLocked tracks t and returns a pending copy to enqueue instead if t
// missed an unblock.
func (b *BlockedEvals) blockLocked(t *tracked) *structs.Evaluation {
	ev := t.eval
	if old, ok := b.byID[ev.ID]; ok {
		// The same eval again (a Reblock after the FSM's Block, or a
		// restore): refresh it, keeping the token if the new call has none.
		if t.token == "" {
			t.token = old.token
		}
		b.untrackLocked(old)
	}
	if old := b.byJob[t.job()][ev.NodeID]; old != nil {
		if ev.CreateIndex < old.eval.CreateIndex {
			b.duplicates = append(b.duplicates, ev)
			return nil
		}
		b.untrackLocked(old)
		b.duplicates = append(b.duplicates, old.eval)
		b.logger.Debug("blocked eval superseded by a newer one of its job",
			"eval_id", old.eval.ID, "newer_eval_id", ev.ID, "job_id", ev.JobID)
	}
	if b.missedUnblockLocked(ev) {
		return pendingCopy(ev)
	}
	b.trackLocked(t)
	return nil
}

// missedUnblockLocked reports whether a relevant unblock happened after the
// snapshot the eval was scheduled from.
func (b *BlockedEvals) missedUnblockLocked(ev *structs.Evaluation) bool {
	snap := ev.SnapshotIndex
	if b.allUnblock > snap {
		return true
	}
	if ev.NodeID != "" {
		return b.nodeUnblocks.after(ev.NodeID, snap)
	}
	if ev.EscapedComputedClass {
		return b.classUnblocks.anyAfter(snap)
	}
	if b.classUnblocks.floor > snap {
		return true
	}
	for class, index := range b.classUnblocks.latest {
		if index > snap && classMayFit(ev, class) {
			return true
		}
	}
	return false
}

// classMayFit: the scheduler found the class eligible, or never saw it.
func classMayFit(ev *structs.Evaluation, class string) bool {
	eligible, seen := ev.ClassEligibility[class]
	return eligible || !seen
}

func (b *BlockedEvals) trackLocked(t *tracked) {
	ev := t.eval
	b.byID[ev.ID] = t
	jk := t.job()
	nodes := b.byJob[jk]
	if nodes == nil {
		nodes = make(map[string]*tracked)
		b.byJob[jk] = nodes
	}
	nodes[ev.NodeID] = t
	switch {
	case ev.NodeID != "":
		m := b.byNode[ev.NodeID]
		if m == nil {
			m = make(map[string]*tracked)
			b.byNode[ev.NodeID] = m
		}
		m[ev.ID] = t
	case ev.EscapedComputedClass:
		b.escaped[ev.ID] = t
	default:
		b.captured[ev.ID] = t
	}
}

func (b *BlockedEvals) untrackLocked(t *tracked) {
	ev := t.eval
	delete(b.byID, ev.ID)
	jk := t.job()
	if nodes := b.byJob[jk]; nodes != nil && nodes[ev.NodeID] == t {
		delete(nodes, ev.NodeID)
		if len(nodes) == 0 {
			delete(b.byJob, jk)
		}
	}
	delete(b.captured, ev.ID)
	delete(b.escaped, ev.ID)
	if m := b.byNode[ev.NodeID]; m != nil {
		delete(m, ev.ID)
		if len(m) == 0 {
			delete(b.byNode, ev.NodeID)
		}
	}
}

// pendingCopy is what the broker gets: the same eval (ID, TriggeredBy
// queued-allocs, class eligibility...) with Status pending so a worker
// schedules it rather than treating it as still blocked.
func pendingCopy(ev *structs.Evaluation) *structs.Evaluation {
	c := ev.Copy()
	c.Status = structs.EvalStatusPending
	return c
}

// releaseLocked untracks ts and returns their pending copies, oldest first.
func (b *BlockedEvals) releaseLocked(ts []*tracked) []*structs.Evaluation {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].eval.CreateIndex != ts[j].eval.CreateIndex {
			return ts[i].eval.CreateIndex < ts[j].eval.CreateIndex
		}
		return ts[i].eval.ID < ts[j].eval.ID
	})
	out := make([]*structs.Evaluation, 0, len(ts))
	for _, t := range ts {
		b.untrackLocked(t)
		out = append(out, pendingCopy(t.eval))
	}
	return out
}

// enqueueLocked hands released evals to the broker. It runs under the lock
// so that a release cannot straddle SetEnabled: the leader disables the
// broker before the tracker and enables it after, so an eval released in
// one term never reaches the broker of the next. The Enqueuer therefore
// must not call back into the tracker.
func (b *BlockedEvals) enqueueLocked(evs []*structs.Evaluation) {
	if len(evs) == 0 || b.broker == nil {
		return
	}
	if be, ok := b.broker.(batchEnqueuer); ok {
		be.EnqueueAll(evs)
		return
	}
	for _, ev := range evs {
		b.broker.Enqueue(ev)
	}
}

// Unblock reports freed capacity or a new node in computedClass at Raft
// index: it releases every escaped eval and every captured eval for which
// the class is eligible or unknown.
func (b *BlockedEvals) Unblock(computedClass string, index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	b.classUnblocks.record(computedClass, index)
	var ts []*tracked
	for _, t := range b.escaped {
		ts = append(ts, t)
	}
	for _, t := range b.captured {
		if classMayFit(t.eval, computedClass) {
			ts = append(ts, t)
		}
	}
	out := b.releaseLocked(ts)
	if len(out) > 0 {
		b.logger.Debug("unblocking evals for class", "class", computedClass, "index", index, "count", len(out))
	}
	b.enqueueLocked(out)
}

// UnblockNode reports freed capacity on nodeID at Raft index: it releases
// the evals pinned to that node.
func (b *BlockedEvals) UnblockNode(nodeID string, index uint64) {
	if nodeID == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	b.nodeUnblocks.record(nodeID, index)
	var ts []*tracked
	for _, t := range b.byNode[nodeID] {
		ts = append(ts, t)
	}
	out := b.releaseLocked(ts)
	if len(out) > 0 {
		b.logger.Debug("unblocking evals for node", "node_id", nodeID, "index", index, "count", len(out))
	}
	b.enqueueLocked(out)
}

// UnblockAll releases every blocked eval, for changes that may affect any
// of them (e.g. the scheduler configuration).
func (b *BlockedEvals) UnblockAll(index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	if index > b.allUnblock {
		b.allUnblock = index
	}
	ts := make([]*tracked, 0, len(b.byID))
	for _, t := range b.byID {
		ts = append(ts, t)
	}
	out := b.releaseLocked(ts)
	if len(out) > 0 {
		b.logger.Debug("unblocking all evals", "index", index, "count", len(out))
	}
	b.enqueueLocked(out)
}

// Untrack drops every blocked eval of a job, e.g. when an eval of the job
// completed with nothing left to place or the job was deregistered.
func (b *BlockedEvals) Untrack(ns, jobID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	for _, t := range b.byJob[jobKey{ns, jobID}] {
		b.untrackLocked(t)
	}
}

// Duplicates drains up to max (all when max <= 0) blocked evals superseded
// by a newer one of the same job; the leader cancels them through Raft.
func (b *BlockedEvals) Duplicates(max int) []*structs.Evaluation {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.duplicates)
	if max > 0 && max < n {
		n = max
	}
	if n == 0 {
		return nil
	}
	out := make([]*structs.Evaluation, n)
	copy(out, b.duplicates)
	rest := copy(b.duplicates, b.duplicates[n:])
	clear(b.duplicates[rest:])
	b.duplicates = b.duplicates[:rest]
	return out
}

// Stats is a point-in-time count of the tracked evals.
type Stats struct {
	TotalBlocked    int // every tracked eval
	TotalEscaped    int // released by any class change
	TotalCaptured   int // released by eligible or unknown classes
	TotalPinned     int // released by their node only
	TotalDuplicates int // superseded, not yet drained by Duplicates
	// ByNode counts pinned evals per node.
	ByNode map[string]int
}

// Stats returns the current counts.
func (b *BlockedEvals) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Stats{
		TotalBlocked:    len(b.byID),
		TotalEscaped:    len(b.escaped),
		TotalCaptured:   len(b.captured),
		TotalDuplicates: len(b.duplicates),
		ByNode:          make(map[string]int, len(b.byNode)),
	}
	for node, m := range b.byNode {
		s.ByNode[node] = len(m)
		s.TotalPinned += len(m)
	}
	return s
}

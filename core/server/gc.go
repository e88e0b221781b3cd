package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// The garbage collector: the leader's core GC jobs. Each job reads the
// candidates of its collection from one state snapshot, hands them to the
// GC plugin deciding the collection one page at a time (gc_pages.go),
// checks the answer against the page (sdk/gc.ValidateResponse: the safety
// floor holds whatever the plugin), and applies the reaps through Raft as
// GCReap entries (structs.GCReapRequestType) of bounded size, paced so that
// a large backlog never holds the Raft apply loop for long. Each entry is
// re-checked object by object as it applies (state.GCReap): an object that
// changed since its page was built is not deleted. CSI claims the plugin
// releases are marked with a GC pseudo-claim (CSIVolumeClaimBatch) for the
// volume watcher, which unpublishes and frees them; GC never calls a driver.
//
// One goroutine per leadership term (gcEngine.run) runs every job on its
// interval, and force GC (ForceGC) on request, one job at a time. It is
// started by establishLeadership and stopped by revokeLeadership (and so by
// Shutdown). Without a GC plugin (Config.GC nil) nothing is collected; with
// its plugin unavailable a job keeps everything and runs again at its next
// interval.

// gcPacing tunes the batches and the pauses between them. Tests shorten it
// (Config.gcPacing).
type gcPacing struct {
	// BatchObjects and BatchJobs bound one GCReap entry (at most
	// structs.MaxGCReapObjects and structs.MaxGCReapJobs).
	BatchObjects int
	BatchJobs    int
	// EntryTarget, when set, sizes each GCReap entry so that it commits in
	// about this long (gcSizer): the cost of a delete grows with the
	// state (memdb copies a longer radix path per index), so a fixed
	// count that commits in a few milliseconds on a small state holds the
	// Raft apply loop, and the placements queued behind it, for tens of
	// milliseconds on a state of a million objects. Entries hold
	// MinBatch to BatchObjects objects. 0 keeps every entry at
	// BatchObjects.
	EntryTarget time.Duration
	MinBatch    int
	// Share is the largest share of the leader's time reap entries take
	// while a backlog drains: after an entry that took d to commit, the
	// next waits d*(1-Share)/Share, within [MinPause, MaxPause]. As
	// containerd's GC scheduler pauses in proportion to the last
	// collection, a slow (loaded) Raft makes GC back off by itself.
	Share              float64
	MinPause, MaxPause time.Duration
	// Scheduling comes first: after its pause, a step waits until the
	// eval broker has had nothing ready or in flight, and no other Raft
	// write has been in flight (Server.quietForGC), for Quiet, or until
	// it has waited MaxYield (so a cluster that never stops scheduling
	// still collects, one step per MaxYield at least). A Go garbage
	// collection cycle or a Raft entry that a step causes then rarely
	// lands on a placement. Quiet 0 never yields.
	Quiet, MaxYield time.Duration
	// MarkWait: a step also waits while Go's own collector is marking
	// (goMarkWatch), for MarkWait at most. A mark phase on a large state's
	// heap lasts seconds and takes a core; a reap step during it competes
	// with both, and placements get what is left. 0 never waits.
	MarkWait time.Duration
	// DecideTimeout bounds one Decide call.
	DecideTimeout time.Duration
	// Limits are the page bounds (sdk/gc's).
	Limits gcLimits
}

// gcBatchObjects is the largest reap entry by default: well below
// structs.MaxGCReapObjects, since a memdb write that touches more than
// some 8,000 radix nodes notifies watchers by walking whole trees (its
// cost then grows with the state, not the entry).
const gcBatchObjects = 2000

// gcEntryTarget is the default time one reap entry takes to commit: the
// most a placement waits behind one. At a million objects a delete costs
// 20-40 µs on a loaded 2-core leader (BenchmarkGCReapEntry in core/state),
// so entries hold some 25-50 objects there, and up to gcBatchObjects on a
// small state.
const gcEntryTarget = time.Millisecond

// gcPageObjects is how many objects the core fills a page to (sdk/gc
// allows up to MaxObjects, which one candidate alone may still take, so
// that a job with that many children is still collected in one run):
// building and deciding a page is one step that takes a core for as long
// as it lasts, and a page of 65,536 objects takes it for about half a
// second.
const gcPageObjects = 8192

func defaultGCPacing() gcPacing {
	return gcPacing{
		BatchObjects: gcBatchObjects, BatchJobs: structs.MaxGCReapJobs,
		EntryTarget: gcEntryTarget, MinBatch: 16,
		Share: 0.2, MinPause: time.Millisecond, MaxPause: 2 * time.Second,
		Quiet: 2 * time.Millisecond, MaxYield: 500 * time.Millisecond, MarkWait: 15 * time.Second,
		DecideTimeout: 30 * time.Second, Limits: defaultGCLimits(),
	}
}

func (p gcPacing) withDefaults() gcPacing {
	d := defaultGCPacing()
	if p.BatchObjects <= 0 || p.BatchObjects > structs.MaxGCReapObjects {
		p.BatchObjects = d.BatchObjects
	}
	if p.BatchJobs <= 0 || p.BatchJobs > structs.MaxGCReapJobs {
		p.BatchJobs = d.BatchJobs
	}
	if p.EntryTarget < 0 {
		p.EntryTarget = 0
	}
	if p.MinBatch <= 0 {
		p.MinBatch = d.MinBatch
	}
	p.MinBatch = min(p.MinBatch, p.BatchObjects)
	if p.Share <= 0 || p.Share > 1 {
		p.Share = d.Share
	}
	if p.MaxPause < p.MinPause {
		p.MaxPause = p.MinPause
	}
	if p.Quiet < 0 {
		p.Quiet = 0
	}
	if p.MaxYield < 0 {
		p.MaxYield = 0
	}
	if p.MarkWait < 0 {
		p.MarkWait = 0
	}
	if p.DecideTimeout <= 0 {
		p.DecideTimeout = d.DecideTimeout
	}
	if p.Limits.candidates <= 0 || p.Limits.candidates > sdkgc.MaxCandidates {
		p.Limits.candidates = d.Limits.candidates
	}
	if p.Limits.objects <= 0 || p.Limits.objects > sdkgc.MaxObjects {
		p.Limits.objects = d.Limits.objects
	}
	return p
}

// gcJob is one core GC job.
type gcJob struct {
	name       string
	collection gcpb.Collection
	interval   func(s *Server) time.Duration
	// enabled: nil is always.
	enabled func(s *Server) bool
}

func jobGCInterval(s *Server) time.Duration { return s.gcConfig().JobGCInterval }

// gcJobs in the order force GC runs them: node GC last, so that the
// allocations of a node are gone first.
var gcJobs = []gcJob{
	{name: "job-gc", collection: gcpb.Collection_COLLECTION_JOB, interval: jobGCInterval},
	{name: "eval-gc", collection: gcpb.Collection_COLLECTION_EVAL, interval: jobGCInterval},
	{name: "csi-plugin-gc", collection: gcpb.Collection_COLLECTION_CSI_PLUGIN, interval: jobGCInterval},
	{name: "csi-volume-claim-gc", collection: gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM,
		interval: func(s *Server) time.Duration { return s.gcConfig().CSIVolumeClaimGCInterval }},
	{name: "one-time-token-gc", collection: gcpb.Collection_COLLECTION_ONE_TIME_TOKEN,
		interval: func(s *Server) time.Duration {
			if s.cfg.OneTimeTokenGCInterval > 0 {
				return s.cfg.OneTimeTokenGCInterval
			}
			return oneTimeTokenGCInterval
		}},
	{name: "expired-acl-token-gc", collection: gcpb.Collection_COLLECTION_ACL_TOKEN, interval: jobGCInterval,
		enabled: func(s *Server) bool { return s.cfg.ACLEnabled }},
	{name: "deployment-gc", collection: gcpb.Collection_COLLECTION_DEPLOYMENT, interval: jobGCInterval},
	{name: "node-gc", collection: gcpb.Collection_COLLECTION_NODE, interval: jobGCInterval},
}

func (s *Server) gcConfig() GCConfig { return s.cfg.GCConfig.withDefaults() }

// gcThresholds are the thresholds in force; force GC sends
// sdk/gc.ForceThreshold for all.
func (s *Server) gcThresholds(force bool) *gcpb.Thresholds {
	if force {
		f := int64(sdkgc.ForceThreshold)
		return &gcpb.Thresholds{EvalNs: f, BatchEvalNs: f, JobNs: f, NodeNs: f, DeploymentNs: f,
			CsiVolumeClaimNs: f, CsiPluginNs: f, AclTokenNs: f}
	}
	c := s.gcConfig()
	return &gcpb.Thresholds{
		EvalNs: int64(c.EvalGCThreshold), BatchEvalNs: int64(c.BatchEvalGCThreshold), JobNs: int64(c.JobGCThreshold),
		NodeNs: int64(c.NodeGCThreshold), DeploymentNs: int64(c.DeploymentGCThreshold),
		CsiVolumeClaimNs: int64(c.CSIVolumeClaimGCThreshold), CsiPluginNs: int64(c.CSIPluginGCThreshold),
		AclTokenNs: int64(c.ACLTokenGCThreshold),
	}
}

// gcEngine is one leadership term's collector.
type gcEngine struct {
	s      *Server
	pacing gcPacing
	// force carries ForceGC's requests to run; done is closed when run
	// returns.
	force chan *gcRequest
	done  chan struct{}
	// size sizes the reap entries of every job of the term: what an
	// entry cost is a fact about the state, whichever job measured it.
	size *gcSizer
	// gomark tells when Go's collector marks (gcPacing.MarkWait).
	gomark *goMarkWatch
}

func newGCEngine(s *Server) *gcEngine {
	p := defaultGCPacing()
	if s.cfg.gcPacing != nil {
		p = *s.cfg.gcPacing
	}
	p = p.withDefaults()
	return &gcEngine{s: s, pacing: p, force: make(chan *gcRequest), done: make(chan struct{}), size: newGCSizer(p), gomark: newGoMarkWatch()}
}

// run runs the jobs on their intervals, and force GC when asked, until ctx
// (the leadership term) ends.
func (g *gcEngine) run(ctx context.Context) {
	defer close(g.done)
	next := make([]time.Time, len(gcJobs))
	start := time.Now()
	for i, j := range gcJobs {
		next[i] = start.Add(j.interval(g.s))
	}
	timer := time.NewTimer(time.Until(earliest(next)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-g.force:
			req.res <- g.runSome(ctx, req.jobs, req.force)
		case <-timer.C:
			for i, j := range gcJobs {
				if ctx.Err() != nil {
					return
				}
				if time.Now().Before(next[i]) {
					continue
				}
				g.runJob(ctx, j, false)
				next[i] = time.Now().Add(j.interval(g.s))
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(earliest(next)))
	}
}

func earliest(ts []time.Time) time.Time {
	e := ts[0]
	for _, t := range ts[1:] {
		if t.Before(e) {
			e = t
		}
	}
	return e
}

// runSome runs the named jobs (nil: every job) once, in gcJobs order
// (node GC last), and returns the first error; later jobs still run.
func (g *gcEngine) runSome(ctx context.Context, names []string, force bool) error {
	var first error
	for _, j := range gcJobs {
		if names != nil && !slices.Contains(names, j.name) {
			continue
		}
		if err := g.runJob(ctx, j, force); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runJob runs one job and logs what it did. A plugin that is unavailable
// keeps everything until the next run; that is logged at debug level only,
// once per run, so a plugin restart causes no error storm.
func (g *gcEngine) runJob(ctx context.Context, j gcJob, force bool) error {
	if j.enabled != nil && !j.enabled(g.s) {
		return nil
	}
	start := time.Now()
	restore := g.s.deferSnapshots()
	st, err := g.collect(ctx, j, force)
	restore()
	g.s.cfg.Metrics.GCRun(j.name, time.Since(start))
	g.s.cfg.Metrics.GCReaped(j.name, st.reaped)
	log := g.s.logger.With("job", j.name, "force", force)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership lost during garbage collection")
	case errors.Is(err, structs.ErrUnavailable):
		log.Debug("garbage collection skipped: plugin unavailable", "error", err)
	default:
		log.Warn("garbage collection failed; it runs again at its next interval", "error", err)
	}
	if st.reaped > 0 || st.released > 0 || st.skipped > 0 {
		// Skipped objects changed, or went, between the page and the
		// entry: a concurrent run or a new plugin may have taken them.
		log.Info("garbage collected", "reaped", st.reaped, "released_claims", st.released, "skipped", st.skipped, "entries", st.entries,
			"steps_past_scheduling", st.forced)
	}
	return err
}

// trace reports a step that started at start (Config.gcTrace).
func (g *gcEngine) trace(step string, start time.Time) {
	if t := g.s.cfg.gcTrace; t != nil {
		t(step, start, time.Since(start))
	}
}

// gcStats counts what one job did.
type gcStats struct{ reaped, released, skipped, entries, forced int }

// gcItem is one object to reap, in the order to reap it.
type gcItem struct {
	kind gcpb.ObjectKind
	ref  structs.GCRef
}

// collect runs one job: page, decide, check, apply.
func (g *gcEngine) collect(ctx context.Context, j gcJob, force bool) (gcStats, error) {
	var st gcStats
	if g.s.cfg.GC == nil {
		return st, structs.NewError(structs.ErrUnavailable, "no GC plugin configured")
	}
	col, err := g.s.cfg.GC.Collector(j.collection)
	if err != nil {
		return st, err
	}
	snap, err := g.s.State().Snapshot()
	if err != nil {
		return st, err
	}
	now := g.s.cfg.Now().UnixNano()
	th := g.s.gcThresholds(force)
	newReq := func() *gcpb.DecideRequest {
		// One region: this one is the authoritative one.
		return &gcpb.DecideRequest{Collection: j.collection, NowUnixNano: now, Thresholds: th, AuthoritativeRegion: true}
	}
	pace := &gcPacer{p: g.pacing, idle: g.s.quietForGC(), marking: g.gomark.marking, stats: &st, size: g.size}
	built := time.Now()
	// Each page is decided and applied as soon as it is built: a run
	// holds one page, not the whole backlog, and the time spent building
	// and deciding a page is paced like the Raft entries' (it competes
	// with scheduling for the leader's CPU just the same).
	process := func(page *gcpb.DecideRequest) error {
		pace.took(time.Since(built))
		g.trace("page", built)
		if err := pace.wait(ctx); err != nil {
			return err
		}
		decided := time.Now()
		checked, err := sdkgc.ValidateRequest(page)
		if err != nil {
			// A page the core built outside the protocol is a bug here;
			// skip the collection rather than send it.
			return fmt.Errorf("gc: built an invalid page: %w", err)
		}
		dctx, cancel := context.WithTimeout(ctx, g.pacing.DecideTimeout)
		resp, err := col.Decide(dctx, page)
		cancel()
		if err != nil {
			return fmt.Errorf("gc: %s: decide: %w", j.name, err)
		}
		if err := sdkgc.ValidateResponse(checked, resp); err != nil {
			return fmt.Errorf("gc: %s: %w", j.name, err)
		}
		g.trace("decide", decided)
		err = g.apply(ctx, page, resp, pace, &st)
		built = time.Now()
		return err
	}
	facts := &gcFacts{s: g.s, snap: snap, jobs: map[structs.NamespacedID]*structs.Job{}, emit: process}
	lim := g.pacing.Limits
	switch j.collection {
	case gcpb.Collection_COLLECTION_EVAL:
		_, err = facts.evalPages(lim, newReq)
	case gcpb.Collection_COLLECTION_JOB:
		_, err = facts.jobPages(lim, newReq)
	case gcpb.Collection_COLLECTION_NODE:
		_, err = facts.nodePages(lim, newReq)
	case gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM:
		_, err = facts.volumePages(lim, newReq)
	case gcpb.Collection_COLLECTION_CSI_PLUGIN:
		_, err = facts.pluginPages(lim, newReq)
	case gcpb.Collection_COLLECTION_ONE_TIME_TOKEN:
		_, err = facts.oneTimeTokenPages(lim, newReq)
	case gcpb.Collection_COLLECTION_ACL_TOKEN:
		_, err = facts.aclTokenPages(lim, newReq)
	case gcpb.Collection_COLLECTION_DEPLOYMENT:
		_, err = facts.deploymentPages(lim, newReq)
	default:
		return st, fmt.Errorf("gc: no pages for collection %s", j.collection)
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	return st, err
}

// apply reaps (and releases) what a checked response decided, children
// before their parents.
func (g *gcEngine) apply(ctx context.Context, page *gcpb.DecideRequest, resp *gcpb.DecideResponse, pace *gcPacer, st *gcStats) error {
	dec := make(map[sdkgc.Key]*gcpb.Decision, len(resp.GetDecisions()))
	for _, d := range resp.GetDecisions() {
		if d.GetAction() == gcpb.Action_ACTION_REAP || d.GetAction() == gcpb.Action_ACTION_RELEASE {
			dec[sdkgc.DecisionKey(d)] = d
		}
	}
	if len(dec) == 0 {
		return nil
	}
	var items []gcItem
	add := func(kind gcpb.ObjectKind, ns, id string) {
		k := sdkgc.Key{Kind: kind, Namespace: ns, ID: id}
		if d := dec[k]; d != nil {
			items = append(items, gcItem{kind: kind, ref: structs.GCRef{Namespace: ns, ID: id, ModifyIndex: d.GetModifyIndex()}})
		}
	}
	const (
		kAlloc = gcpb.ObjectKind_OBJECT_KIND_ALLOC
		kEval  = gcpb.ObjectKind_OBJECT_KIND_EVAL
	)
	for _, c := range page.GetEvals() {
		for _, a := range c.GetAllocs() {
			add(kAlloc, a.GetNamespace(), a.GetId())
		}
		add(kEval, c.GetEval().GetNamespace(), c.GetEval().GetId())
	}
	for _, c := range page.GetJobs() {
		for _, a := range c.GetAllocs() {
			add(kAlloc, a.GetNamespace(), a.GetId())
		}
		for _, e := range c.GetEvals() {
			add(kEval, e.GetNamespace(), e.GetId())
		}
		add(gcpb.ObjectKind_OBJECT_KIND_JOB, c.GetJob().GetNamespace(), c.GetJob().GetId())
	}
	for _, n := range page.GetNodes() {
		add(gcpb.ObjectKind_OBJECT_KIND_NODE, "", n.GetId())
	}
	for _, p := range page.GetCsiPlugins() {
		add(gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN, "", p.GetId())
	}
	for _, t := range page.GetOneTimeTokens() {
		add(gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, "", t.GetAccessorId())
	}
	for _, t := range page.GetAclTokens() {
		add(gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN, "", t.GetAccessorId())
	}
	for _, d := range page.GetDeployments() {
		add(gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT, d.GetNamespace(), d.GetId())
	}
	if err := g.reap(ctx, items, pace, st); err != nil {
		return err
	}
	return g.release(ctx, page, dec, pace, st)
}

// reap proposes items as GCReap entries of at most BatchObjects objects
// and BatchJobs jobs, in order, pausing between entries.
func (g *gcEngine) reap(ctx context.Context, items []gcItem, pace *gcPacer, st *gcStats) error {
	var batch structs.GCReapRequest
	flush := func() error {
		if batch.Len() == 0 {
			return nil
		}
		req := batch
		batch = structs.GCReapRequest{}
		if err := req.Validate(); err != nil {
			return err // a bug in the batching; never proposed
		}
		if err := pace.wait(ctx); err != nil {
			return err
		}
		start := time.Now()
		_, resp, err := g.s.gcApply(structs.GCReapRequestType, &req)
		took := time.Since(start)
		g.trace("entry", start)
		pace.took(took)
		if err != nil {
			return fmt.Errorf("gc: reap: %w", err)
		}
		st.entries++
		if r, ok := resp.(*structs.GCReapResponse); ok {
			// Sized by the time the entry held the state machine, not
			// its commit: the commit adds the log's write and the
			// queue, which do not grow with the entry and would shrink
			// every entry to the floor.
			pace.size.committed(req.Len(), r.Apply)
			st.reaped += r.Reaped()
			st.skipped += r.Skipped
		}
		return nil
	}
	size := g.pacing.BatchObjects
	for _, it := range items {
		if pace.size != nil {
			size = pace.size.next()
		}
		if batch.Len() >= size || (it.kind == gcpb.ObjectKind_OBJECT_KIND_JOB && len(batch.Jobs) >= g.pacing.BatchJobs) {
			if err := flush(); err != nil {
				return err
			}
		}
		switch it.kind {
		case gcpb.ObjectKind_OBJECT_KIND_ALLOC:
			batch.Allocs = append(batch.Allocs, it.ref)
		case gcpb.ObjectKind_OBJECT_KIND_EVAL:
			batch.Evals = append(batch.Evals, it.ref)
		case gcpb.ObjectKind_OBJECT_KIND_JOB:
			batch.Jobs = append(batch.Jobs, it.ref)
		case gcpb.ObjectKind_OBJECT_KIND_NODE:
			batch.Nodes = append(batch.Nodes, it.ref)
		case gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN:
			batch.CSIPlugins = append(batch.CSIPlugins, it.ref)
		case gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN:
			batch.OneTimeTokens = append(batch.OneTimeTokens, it.ref)
		case gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN:
			batch.ACLTokens = append(batch.ACLTokens, it.ref)
		case gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT:
			batch.Deployments = append(batch.Deployments, it.ref)
		}
	}
	return flush()
}

// release marks the claims the plugin released, one entry per volume: a
// GC pseudo-claim moves each to the volume's past claims and wakes the
// volume watcher, which unpublishes and frees it. Each volume is re-checked
// first: still at the decided index, and each claim's allocation gone or
// client-terminal. A volume gone since is skipped, not an error.
func (g *gcEngine) release(ctx context.Context, page *gcpb.DecideRequest, dec map[sdkgc.Key]*gcpb.Decision, pace *gcPacer, st *gcStats) error {
	for _, v := range page.GetCsiVolumes() {
		var claims []*structs.CSIVolumeClaimRequest
		var index uint64
		for _, c := range v.GetClaims() {
			d := dec[sdkgc.Key{Kind: gcpb.ObjectKind_OBJECT_KIND_CSI_CLAIM, Namespace: v.GetNamespace(), VolumeID: v.GetId(), ID: c.GetAllocId()}]
			if d == nil || d.GetAction() != gcpb.Action_ACTION_RELEASE {
				continue
			}
			index = d.GetModifyIndex()
			claims = append(claims, &structs.CSIVolumeClaimRequest{Namespace: v.GetNamespace(), VolumeID: v.GetId(),
				Claim: &structs.CSIVolumeClaim{AllocationID: c.GetAllocId(), NodeID: c.GetNodeId(),
					Mode: structs.CSIVolumeClaimGC, State: structs.CSIVolumeClaimStateUnpublishing}})
		}
		if len(claims) == 0 {
			continue
		}
		store := g.s.State()
		cur, err := store.CSIVolumeRaw(nil, v.GetNamespace(), v.GetId())
		if err != nil {
			return err
		}
		if cur == nil || cur.ModifyIndex != index {
			st.skipped += len(claims)
			continue
		}
		kept := claims[:0]
		for _, c := range claims {
			a, err := store.AllocByID(nil, c.Claim.AllocationID)
			if err != nil {
				return err
			}
			if a != nil && !a.ClientTerminalStatus() {
				st.skipped++
				continue
			}
			kept = append(kept, c)
		}
		if len(kept) == 0 {
			continue
		}
		if err := pace.wait(ctx); err != nil {
			return err
		}
		start := time.Now()
		_, _, err = g.s.gcApply(structs.CSIVolumeClaimBatchRequestType, &structs.CSIVolumeClaimBatchRequest{Claims: kept})
		pace.took(time.Since(start))
		switch {
		case errors.Is(err, structs.ErrNotFound):
			st.skipped += len(kept) // deleted since the check
		case err != nil:
			return fmt.Errorf("gc: release claims of volume %s: %w", v.GetId(), err)
		default:
			st.entries++
			st.released += len(kept)
		}
	}
	return nil
}

// gcPacer spaces one job's steps (page decisions and Raft entries): before
// every step but the first it waits in proportion to how long the last one
// took (gcPacing.Share), then yields to scheduling (gcPacing.Quiet,
// MaxYield).
type gcPacer struct {
	p gcPacing
	// idle reports whether the eval broker has nothing ready or in
	// flight, and since when (evalbroker.Broker.Idle); nil never yields.
	idle func() (bool, time.Time)
	// marking reports whether Go's collector is marking; nil never waits.
	marking func() bool
	stats   *gcStats // counts the steps taken past MaxYield or MarkWait; may be nil
	size    *gcSizer // sizes reap entries; nil: BatchObjects each
	// now and sleep default to the wall clock.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	last  time.Duration
	used  bool
}

func (p *gcPacer) took(d time.Duration) { p.last, p.used = d, true }

func (p *gcPacer) pause() time.Duration {
	d := time.Duration(float64(p.last) * (1 - p.p.Share) / p.p.Share)
	return min(max(d, p.p.MinPause), p.p.MaxPause)
}

func (p *gcPacer) wait(ctx context.Context) error {
	if !p.used {
		return ctx.Err()
	}
	if err := p.doSleep(ctx, p.pause()); err != nil {
		return err
	}
	if err := p.yield(ctx); err != nil {
		return err
	}
	return p.waitMark(ctx)
}

// gcMarkPoll is how often a step waiting for Go's mark phase to end looks.
const gcMarkPoll = 5 * time.Millisecond

// waitMark waits until Go's collector is not marking, for MarkWait at
// most.
func (p *gcPacer) waitMark(ctx context.Context) error {
	if p.marking == nil || p.p.MarkWait <= 0 {
		return ctx.Err()
	}
	deadline := p.clock().Add(p.p.MarkWait)
	for p.marking() {
		now := p.clock()
		if !now.Before(deadline) {
			if p.stats != nil {
				p.stats.forced++
			}
			return ctx.Err()
		}
		if err := p.doSleep(ctx, min(gcMarkPoll, deadline.Sub(now))); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// yield waits until scheduling has been quiet for Quiet, for MaxYield at
// most.
func (p *gcPacer) yield(ctx context.Context) error {
	if p.idle == nil || p.p.Quiet <= 0 {
		return ctx.Err()
	}
	deadline := p.clock().Add(p.p.MaxYield)
	for {
		idle, since := p.idle()
		now := p.clock()
		quietFor := now.Sub(since)
		if idle && quietFor >= p.p.Quiet {
			return ctx.Err()
		}
		if !now.Before(deadline) {
			if p.stats != nil {
				p.stats.forced++
			}
			return ctx.Err()
		}
		d := p.p.Quiet
		if idle {
			d -= quietFor
		}
		if err := p.doSleep(ctx, min(d, deadline.Sub(now))); err != nil {
			return err
		}
	}
}

func (p *gcPacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *gcPacer) doSleep(ctx context.Context, d time.Duration) error {
	if p.sleep != nil {
		return p.sleep(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// gcSizer sizes reap entries to gcPacing.EntryTarget: the time an entry
// held the state machine (GCReapResponse.Apply) gives the cost of one
// object on the state as it is now, and the next entry holds as many
// objects as that cost fits in the target, within [MinBatch,
// BatchObjects]. It grows at most twofold from one entry to the next, so
// that one entry that applied fast by chance does not make the next a
// long one, and shrinks at once. Without a target every entry holds
// BatchObjects.
type gcSizer struct {
	target      time.Duration
	lo, hi, cur int
}

func newGCSizer(p gcPacing) *gcSizer {
	z := &gcSizer{target: p.EntryTarget, lo: p.MinBatch, hi: p.BatchObjects, cur: p.BatchObjects}
	if z.target > 0 {
		z.cur = z.lo // nothing measured yet: start small
	}
	return z
}

// next is the size of the next entry.
func (z *gcSizer) next() int { return z.cur }

// committed records that an entry of n objects took d to commit.
func (z *gcSizer) committed(n int, d time.Duration) {
	if z == nil || z.target <= 0 || n <= 0 {
		return
	}
	per := max(d/time.Duration(n), time.Nanosecond)
	fit := int(z.target / per)
	z.cur = min(max(fit, z.lo), z.hi, 2*z.cur)
}

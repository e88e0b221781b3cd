// Package gcengine is the leader's garbage collector: the core GC jobs.
//
// Each job reads the candidates of its collection from one state snapshot
// (Candidates), hands them to the GC plugin deciding the collection one
// page at a time, checks the answer against the page
// (sdk/gc.ValidateResponse: the safety floor holds whatever the plugin),
// turns it into writes (Decide) and applies the reaps through Raft as
// GCReap entries (structs.GCReapRequestType) of bounded size, paced so
// that a large backlog never holds the Raft apply loop for long (Pacer).
// Each entry is re-checked object by object as it applies (state.GCReap):
// an object that changed since its page was built is not deleted. CSI
// claims the plugin releases are marked with a GC pseudo-claim
// (CSIVolumeClaimBatch) for the volume watcher, which unpublishes and
// frees them; GC never calls a driver.
//
// One goroutine per leadership term (Engine.Run) runs every job on its
// interval, and forced runs on request (Engine.RunNow), one job at a time.
// The server starts an Engine when it establishes leadership and stops it
// by ending Run's context when it loses it. Without a GC plugin nothing is
// collected; with its plugin unavailable a job keeps everything and runs
// again at its next interval.
//
// The engine reaches the server only through Config: the state store,
// the Raft apply of its own entries, the broker's and Raft's quiet (which
// its steps yield to), and the deferral of Raft snapshots while a job runs.
package gcengine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// Metrics observes the runs (the agent's metrics registry).
type Metrics interface {
	GCRun(job string, d time.Duration)
	GCReaped(job string, n int)
}

// Config configures an Engine.
type Config struct {
	// State returns the server's current state store (a snapshot restore
	// replaces it).
	State func() *state.StateStore
	// Router hands out the plugin deciding each collection; nil: every
	// run is structs.ErrUnavailable and nothing is collected.
	Router Router
	// Apply commits one of the GC's own entries through Raft and returns
	// its index and the FSM's response (the server's gcApply: not a write
	// GC steps yield to).
	Apply func(t structs.MessageType, msg any) (uint64, any, error)
	// Propose, when set, hands one of the GC's own entries to Raft and
	// returns at once with what waits for its answer (Apply's): while
	// the cluster is idle, reap entries are pipelined through it
	// (Pacing.IdleInFlight), the next one encoded and in the log while
	// the last applies. Entries proposed one after another are in the log
	// in that order. nil: every entry goes through Apply.
	Propose func(t structs.MessageType, msg any) (wait func() (uint64, any, error), err error)
	// Quiet reports whether scheduling and the other Raft writes are idle,
	// and since when; steps yield to them (Pacing.Quiet), and go at once
	// once it has been quiet for Pacing.IdleAfter. Called from a run's
	// two goroutines. nil never yields.
	Quiet func() (bool, time.Time)
	// DeferSnapshots defers Raft snapshots for the length of a job and
	// returns what undoes it; nil defers nothing.
	DeferSnapshots func() (restore func())
	// JobType is the declaration of a job type's plugin, for evals whose
	// job is gone; nil knows none.
	JobType func(jobType string) (structs.JobTypeBehavior, bool)
	// Settings are the thresholds and intervals (zero fields: defaults);
	// OneTimeTokenInterval is one-time-token-gc's interval (default
	// DefaultOneTimeTokenInterval), and
	// ACLEnabled enables expired-acl-token-gc.
	Settings             Settings
	OneTimeTokenInterval time.Duration
	ACLEnabled           bool
	// Pacing, when set, replaces DefaultPacing (tests, benchmarks).
	Pacing *Pacing
	// Trace, when set, is told of each step as it ends: "page" (building
	// a page), "decide" (the plugin's decision and its checks) or "entry"
	// (a reap entry's commit), when it started and how long it took. A
	// run's pages and entries are on two goroutines (collect): it may be
	// called from both at once.
	Trace func(step string, start time.Time, d time.Duration)
	// Metrics observes the runs; nil observes nothing.
	Metrics Metrics
	// Now is the clock the plugin judges ages by; nil: time.Now.
	Now    func() time.Time
	Logger hclog.Logger
}

// DefaultOneTimeTokenInterval is one-time-token-gc's default interval.
const DefaultOneTimeTokenInterval = 10 * time.Minute

// Engine is one leadership term's collector.
type Engine struct {
	cfg    Config
	pacing Pacing
	// force carries RunNow's requests to Run; done is closed when Run
	// returns.
	force chan *request
	done  chan struct{}
	// size sizes the reap entries of every job of the term: what an
	// entry cost is a fact about the state, whichever job measured it.
	size *sizer
	// gomark tells when Go's collector marks (Pacing.MarkWait).
	gomark *goMarkWatch
}

// New returns an Engine; Run runs it.
func New(cfg Config) *Engine {
	cfg.Settings = cfg.Settings.WithDefaults()
	if cfg.OneTimeTokenInterval <= 0 {
		cfg.OneTimeTokenInterval = DefaultOneTimeTokenInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	p := DefaultPacing()
	if cfg.Pacing != nil {
		p = *cfg.Pacing
	}
	p = p.WithDefaults()
	return &Engine{cfg: cfg, pacing: p, force: make(chan *request), done: make(chan struct{}), size: newSizer(p), gomark: newGoMarkWatch()}
}

// request asks Run to run jobs (nil: all, in order) now.
type request struct {
	jobs  []string
	force bool
	res   chan error
}

// Run runs the jobs on their intervals, and RunNow's requests, until ctx
// (the leadership term) ends. It is the engine's only goroutine.
func (g *Engine) Run(ctx context.Context) {
	defer close(g.done)
	next := make([]time.Time, len(jobs))
	start := time.Now()
	for i, j := range jobs {
		next[i] = start.Add(j.interval(&g.cfg))
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
			for i, j := range jobs {
				if ctx.Err() != nil {
					return
				}
				if time.Now().Before(next[i]) {
					continue
				}
				_ = g.runJob(ctx, j, false) // logged
				next[i] = time.Now().Add(j.interval(&g.cfg))
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

// RunNow has Run run the named jobs (nil: every job, node GC last) now,
// forced or not, and waits for them. It returns structs.ErrNoLeader when
// Run has ended or ends meanwhile (leadership lost), and the first job's
// error otherwise; ctx ending returns its error (the run goes on).
func (g *Engine) RunNow(ctx context.Context, names []string, force bool) error {
	req := &request{jobs: names, force: force, res: make(chan error, 1)}
	select {
	case g.force <- req:
	case <-g.done:
		return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership lost")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.res:
		return err
	case <-g.done:
		// Run answers a request it took before returning; the buffered
		// answer may be there already.
		select {
		case err := <-req.res:
			return err
		default:
		}
		return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership lost during garbage collection")
	case <-ctx.Done():
		// The run goes on; its answer is dropped (res is buffered).
		return ctx.Err()
	}
}

// runSome runs the named jobs (nil: every job) once, in jobs order
// (node GC last), and returns the first error; later jobs still run.
func (g *Engine) runSome(ctx context.Context, names []string, force bool) error {
	var first error
	for _, j := range jobs {
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
func (g *Engine) runJob(ctx context.Context, j job, force bool) error {
	if j.enabled != nil && !j.enabled(&g.cfg) {
		return nil
	}
	start := time.Now()
	restore := func() {}
	if g.cfg.DeferSnapshots != nil {
		restore = g.cfg.DeferSnapshots()
	}
	st, err := g.collect(ctx, j, force)
	restore()
	if m := g.cfg.Metrics; m != nil {
		m.GCRun(j.name, time.Since(start))
		m.GCReaped(j.name, st.Reaped)
	}
	log := g.cfg.Logger.With("job", j.name, "force", force)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return structs.NewError(structs.ErrNoLeader, "No cluster leader: leadership lost during garbage collection")
	case errors.Is(err, structs.ErrUnavailable):
		log.Debug("garbage collection skipped: plugin unavailable", "error", err)
	default:
		log.Warn("garbage collection failed; it runs again at its next interval", "error", err)
	}
	if st.Reaped > 0 || st.Released > 0 || st.Skipped > 0 {
		// Skipped objects changed, or went, between the page and the
		// entry: a concurrent run or a new plugin may have taken them.
		log.Info("garbage collected", "reaped", st.Reaped, "released_claims", st.Released, "skipped", st.Skipped, "entries", st.Entries,
			"steps_past_scheduling", st.Forced)
	}
	return err
}

// trace reports a step that started at start (Config.Trace).
func (g *Engine) trace(step string, start time.Time) {
	if t := g.cfg.Trace; t != nil {
		t(step, start, time.Since(start))
	}
}

// Stats counts what one job did: objects reaped, claims released, objects
// skipped (changed or gone since their page), entries committed, and steps
// taken past scheduling or Go's mark phase (Pacing.MaxYield, MarkWait).
type Stats struct{ Reaped, Released, Skipped, Entries, Forced int }

// Collect runs the named job once, now, on the caller's goroutine, beside
// Run (tests: runs that overlap).
func (g *Engine) Collect(ctx context.Context, name string, force bool) (Stats, error) {
	j, ok := jobNamed(name)
	if !ok {
		return Stats{}, fmt.Errorf("gc: no job %q", name)
	}
	return g.collect(ctx, j, force)
}

// collect runs one job: page, decide, check, apply.
func (g *Engine) collect(ctx context.Context, j job, force bool) (Stats, error) {
	var st Stats
	if g.cfg.Router == nil {
		return st, structs.NewError(structs.ErrUnavailable, "no GC plugin configured")
	}
	col, err := g.cfg.Router.Collector(j.collection)
	if err != nil {
		return st, err
	}
	snap, err := g.cfg.State().Snapshot()
	if err != nil {
		return st, err
	}
	now := g.cfg.Now().UnixNano()
	th := Thresholds(g.cfg.Settings, force)
	newReq := func() *gcpb.DecideRequest {
		// One region: this one is the authoritative one.
		return &gcpb.DecideRequest{Collection: j.collection, NowUnixNano: now, Thresholds: th, AuthoritativeRegion: true}
	}
	// Pages are built and decided on their own goroutine (decidePages),
	// and applied on this one: while the cluster is idle, the next page
	// is built and decided while this one's entries apply (one page
	// ahead at most); while it is busy, one step at a time, as each
	// competes with scheduling for the leader's CPU. Each has its own
	// Pacer: the applier's sizes the entries.
	pace := &Pacer{p: g.pacing, idle: g.cfg.Quiet, marking: g.gomark.marking, stats: &st, size: g.size}
	ap := &applier{g: g, pace: pace, st: &st}
	// The first entry follows the first page's decision: it waits and
	// yields like any later step (no step of the run goes unpaced but
	// the first page's).
	pace.Took(0)
	var dst Stats
	dpace := &Pacer{p: g.pacing, idle: g.cfg.Quiet, marking: newGoMarkWatch().marking, stats: &dst}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	plans := make(chan decided)
	var derr error
	decidedAll := make(chan struct{})
	go func() {
		defer close(decidedAll)
		defer close(plans)
		derr = g.decidePages(rctx, j, col, snap, newReq, dpace, plans)
	}()
	var aerr error
	for d := range plans {
		if aerr == nil {
			if aerr = ap.apply(rctx, d.plan); aerr != nil {
				cancel() // the decider stops at its next step
			}
		}
		close(d.applied)
	}
	<-decidedAll
	// The entries still in flight are answered whatever happened: their
	// reaps count, and none outlives the run.
	serr := ap.settleAll()
	st.Forced += dst.Forced
	switch {
	case aerr != nil:
		err = aerr
	case derr != nil:
		err = derr
	default:
		err = serr
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}
	return st, err
}

// decided is one page's plan, and what the applier closes once it has
// applied it.
type decided struct {
	plan    Plan
	applied chan struct{}
}

// decidePages builds the pages of job j's collection from snap, has the
// plugin decide each, checks the answers and sends the plans to plans, in
// order. It runs one page ahead of the applier while the cluster is idle
// (Pacer.Idle): a busy step first waits for the last page to be applied,
// and a page sent while the cluster is busy is applied before the next
// is built, as when building, deciding and applying were one loop.
func (g *Engine) decidePages(ctx context.Context, j job, col sdkgc.Collector, snap *state.StateSnapshot,
	newReq func() *gcpb.DecideRequest, pace *Pacer, plans chan<- decided) error {
	var last chan struct{} // the last page's applied
	waitApplied := func() error {
		if last == nil {
			return nil
		}
		select {
		case <-last:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	built := time.Now()
	process := func(page *gcpb.DecideRequest) error {
		pace.Took(time.Since(built))
		g.trace("page", built)
		if err := pace.Wait(ctx); err != nil {
			return err
		}
		if !pace.Idle() {
			if err := waitApplied(); err != nil {
				return err
			}
		}
		decidedAt := time.Now()
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
		g.trace("decide", decidedAt)
		d := decided{plan: Decide(page, resp), applied: make(chan struct{})}
		select {
		case plans <- d:
		case <-ctx.Done():
			return ctx.Err()
		}
		last = d.applied
		if !pace.clusterIdle() {
			// Busy: the next page is built once this one is applied.
			if err := waitApplied(); err != nil {
				return err
			}
		}
		built = time.Now()
		return nil
	}
	facts := &gcFacts{snap: snap, jobType: g.cfg.JobType, jobs: map[structs.NamespacedID]*structs.Job{}, emit: process}
	_, err := facts.pages(j.collection, g.pacing.Limits, newReq)
	return err
}

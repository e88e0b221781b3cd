package gcengine

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
)

// Pacing tunes the batches and the pauses between them. Tests shorten it
// (Config.Pacing).
type Pacing struct {
	// BatchObjects and BatchJobs bound one GCReap entry (at most
	// structs.MaxGCReapObjects and structs.MaxGCReapJobs).
	BatchObjects int
	BatchJobs    int
	// EntryTarget, when set, sizes each GCReap entry so that it commits in
	// about this long (sizer): the cost of a delete grows with the
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
	// write has been in flight (Config.Quiet), for Quiet, or until
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
	// IdleAfter: once scheduling and the other Raft writes have been
	// quiet for this long (Config.Quiet), the cluster is idle and a step
	// goes at once: no share pause, no wait for Go's mark phase, and its
	// reap entry is sized to IdleEntryTarget instead of EntryTarget. There
	// is then no placement to keep waiting, and a backlog drains at the
	// speed of the state machine instead of at Share of it. A placement
	// that arrives during an idle step waits for the entries in flight
	// (IdleInFlight of IdleEntryTarget), and the next step is paced as
	// before: busy. A cluster that schedules every few seconds is never
	// idle. 0 never counts the cluster idle.
	IdleAfter       time.Duration
	IdleEntryTarget time.Duration
	// IdleInFlight is how many reap entries an idle step may have
	// proposed and not yet applied (Config.Propose): the next entry is
	// cut, encoded and in the log while the last applies, and the page
	// after is built and decided while the last entries of this one
	// apply. A placement arriving then waits behind IdleInFlight entries
	// at most. A busy step waits for every entry in flight first, and
	// for its own. 1 (or no Propose): one at a time.
	IdleInFlight int
	// DecideTimeout bounds one call of the plugin's Decide.
	DecideTimeout time.Duration
	// Limits are the page bounds (sdk/gc's).
	Limits Limits
}

// batchObjects is the largest reap entry by default: well below
// structs.MaxGCReapObjects, since a memdb write that touches more than
// some 8,000 radix nodes notifies watchers by walking whole trees (its
// cost then grows with the state, not the entry).
const batchObjects = 2000

// entryTarget is the default time one reap entry takes to commit: the
// most a placement waits behind one. At a million objects a delete costs
// 20-40 µs on a loaded 2-core leader (BenchmarkGCReapEntry in core/state),
// so entries hold some 25-50 objects there, and up to batchObjects on a
// small state.
const entryTarget = time.Millisecond

// idleAfter is how long the cluster must have been quiet for a GC step to
// count it idle: well above the gaps of a cluster that places jobs
// steadily, so that such a cluster keeps the busy pacing and its p99. At
// one job every 1.2 s and an idleAfter of 1 s, every placement arrived
// behind idle entries: p50 20 ms, p99 145 ms, where the busy pacing gave
// 1.5 ms and 13 ms (BenchmarkGCSchedulingLatency, -gcbench.interval=1.2s).
const idleAfter = 5 * time.Second

// idleEntryTarget is the time one reap entry holds the state machine when
// the cluster is idle: long enough that an entry's fixed costs (the
// commit's wake-ups, memdb's commit) are small next to its deletes, short
// enough that the first placement after an idle spell waits little
// behind the entries in flight. A larger entry also shares more of the
// radix paths its deletes copy (BenchmarkGCReapEntry: 6,159 B an object
// at 300 objects an entry, 5,624 at 900), and 30 ms rather than 10 ms
// took 10-20% less CPU an object (BenchmarkGCBacklog, docs/benchmarks.md,
// "Garbage collection"), for a first placement that waits up to 60 ms
// rather than 20 ms behind the entries in flight.
const idleEntryTarget = 30 * time.Millisecond

// idleInFlight is how many reap entries an idle step pipelines: two, so
// that one applies while the next is prepared and committed; the first
// placement after an idle spell waits behind two entries at most
// (2 x idleEntryTarget).
const idleInFlight = 2

// pageObjects is how many objects the core fills a page to (sdk/gc
// allows up to MaxObjects, which one candidate alone may still take, so
// that a job with that many children is still collected in one run):
// building and deciding a page is one step that takes a core for as long
// as it lasts, and a page of 65,536 objects takes it for about half a
// second.
const pageObjects = 8192

// DefaultPacing is the pacing of a production leader.
func DefaultPacing() Pacing {
	return Pacing{
		BatchObjects: batchObjects, BatchJobs: structs.MaxGCReapJobs,
		EntryTarget: entryTarget, MinBatch: 16,
		Share: 0.2, MinPause: time.Millisecond, MaxPause: 2 * time.Second,
		Quiet: 2 * time.Millisecond, MaxYield: 500 * time.Millisecond, MarkWait: 15 * time.Second,
		IdleAfter: idleAfter, IdleEntryTarget: idleEntryTarget, IdleInFlight: idleInFlight,
		DecideTimeout: 30 * time.Second, Limits: DefaultLimits(),
	}
}

// WithDefaults replaces the fields of p out of their bounds with
// DefaultPacing's.
func (p Pacing) WithDefaults() Pacing {
	d := DefaultPacing()
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
	if p.IdleAfter < 0 {
		p.IdleAfter = 0
	}
	if p.IdleEntryTarget <= 0 {
		p.IdleEntryTarget = max(p.EntryTarget, d.IdleEntryTarget)
	}
	if p.IdleInFlight <= 0 {
		p.IdleInFlight = 1
	}
	if p.DecideTimeout <= 0 {
		p.DecideTimeout = d.DecideTimeout
	}
	if p.Limits.Candidates <= 0 || p.Limits.Candidates > sdkgc.MaxCandidates {
		p.Limits.Candidates = d.Limits.Candidates
	}
	if p.Limits.Objects <= 0 || p.Limits.Objects > sdkgc.MaxObjects {
		p.Limits.Objects = d.Limits.Objects
	}
	return p
}

// Pacer spaces one job's steps (page decisions and Raft entries): before
// every step but the first it waits in proportion to how long the last one
// took (Pacing.Share), then yields to scheduling (Pacing.Quiet, MaxYield).
// The server's summary reconciliation paces its entries with one too.
type Pacer struct {
	p Pacing
	// idle reports whether scheduling and the other Raft writes are
	// quiet, and since when (Config.Quiet); nil never yields.
	idle func() (bool, time.Time)
	// marking reports whether Go's collector is marking; nil never waits.
	marking func() bool
	stats   *Stats // counts the steps taken past MaxYield or MarkWait; may be nil
	size    *sizer // sizes reap entries; nil: BatchObjects each
	// now and sleep default to the wall clock.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	last  time.Duration
	used  bool
	// idleStep says whether the step Wait last let go is an idle one
	// (Pacing.IdleAfter): its entry is sized to IdleEntryTarget.
	idleStep bool
}

// NewPacer returns a Pacer of p (with its defaults) that yields while idle
// reports scheduling busy (nil: never yields).
func NewPacer(p Pacing, idle func() (bool, time.Time)) *Pacer {
	return &Pacer{p: p.WithDefaults(), idle: idle}
}

// Took records that the last step took d.
func (p *Pacer) Took(d time.Duration) { p.last, p.used = d, true }

func (p *Pacer) pause() time.Duration {
	d := time.Duration(float64(p.last) * (1 - p.p.Share) / p.p.Share)
	return min(max(d, p.p.MinPause), p.p.MaxPause)
}

// Wait waits before the next step: nothing before the first or while the
// cluster is idle (Pacing.IdleAfter), else the share pause, then for
// scheduling to be quiet and Go's mark phase to end (each bounded). It
// returns ctx's error when ctx ends.
func (p *Pacer) Wait(ctx context.Context) error {
	p.idleStep = p.clusterIdle()
	if !p.used || p.idleStep {
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

// clusterIdle reports whether scheduling and the other Raft writes have
// been quiet for IdleAfter.
func (p *Pacer) clusterIdle() bool {
	if p.idle == nil || p.p.IdleAfter <= 0 {
		return false
	}
	idle, since := p.idle()
	return idle && p.clock().Sub(since) >= p.p.IdleAfter
}

// Idle reports whether the step Wait last let go found the cluster idle.
func (p *Pacer) Idle() bool { return p.idleStep }

// entrySize is how many objects the next reap entry holds: sized by the
// sizer to the step's target (idle or busy), else BatchObjects.
func (p *Pacer) entrySize() int {
	if p.size == nil {
		return p.p.BatchObjects
	}
	return p.size.next(p.idleStep)
}

// markPoll is how often a step waiting for Go's mark phase to end looks.
const markPoll = 5 * time.Millisecond

// waitMark waits until Go's collector is not marking, for MarkWait at
// most.
func (p *Pacer) waitMark(ctx context.Context) error {
	if p.marking == nil || p.p.MarkWait <= 0 {
		return ctx.Err()
	}
	deadline := p.clock().Add(p.p.MarkWait)
	for p.marking() {
		now := p.clock()
		if !now.Before(deadline) {
			if p.stats != nil {
				p.stats.Forced++
			}
			return ctx.Err()
		}
		if err := p.doSleep(ctx, min(markPoll, deadline.Sub(now))); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// yield waits until scheduling has been quiet for Quiet, for MaxYield at
// most.
func (p *Pacer) yield(ctx context.Context) error {
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
				p.stats.Forced++
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

func (p *Pacer) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

func (p *Pacer) doSleep(ctx context.Context, d time.Duration) error {
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

// sizer sizes reap entries to Pacing.EntryTarget, or IdleEntryTarget
// for an idle step: the time an entry held the state machine
// (GCReapResponse.Apply) gives the cost of one object on the state as it
// is now, and the next entry holds as many objects as that cost fits in
// the target, within [MinBatch, BatchObjects]. Each target's size grows
// at most twofold from one entry to the next, so that one entry that
// applied fast by chance does not make the next a long one, and shrinks at
// once. Without a target every entry holds BatchObjects.
type sizer struct {
	busy, idle sizeLane
}

// sizeLane is one target's size.
type sizeLane struct {
	target      time.Duration
	lo, hi, cur int
}

func newSizer(p Pacing) *sizer {
	lane := func(target time.Duration) sizeLane {
		l := sizeLane{target: target, lo: p.MinBatch, hi: p.BatchObjects, cur: p.BatchObjects}
		if target > 0 {
			l.cur = l.lo // nothing measured yet: start small
		}
		return l
	}
	idle := p.IdleEntryTarget
	if p.EntryTarget <= 0 {
		idle = 0 // no targets: BatchObjects in both
	}
	return &sizer{busy: lane(p.EntryTarget), idle: lane(idle)}
}

// next is the size of the next entry, idle or busy.
func (z *sizer) next(idle bool) int {
	if idle {
		return z.idle.cur
	}
	return z.busy.cur
}

// committed records that an entry of n objects took d to commit.
func (z *sizer) committed(n int, d time.Duration) {
	if z == nil || n <= 0 {
		return
	}
	per := max(d/time.Duration(n), time.Nanosecond)
	z.busy.fit(per)
	z.idle.fit(per)
}

func (l *sizeLane) fit(per time.Duration) {
	if l.target <= 0 {
		return
	}
	fit := int(l.target / per)
	l.cur = min(max(fit, l.lo), l.hi, 2*l.cur)
}

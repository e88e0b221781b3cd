// Package periodic is the leader's periodic dispatcher: it launches a child
// of every active periodic job at each time the job's cron specs name, in
// the job's time zone.
//
// While enabled (on the leader) the dispatcher keeps, for every active
// periodic job, the job and its next launch time. The FSM reports every job
// write and delete (JobChanged, JobRemoved) and Run, owned by the leader,
// launches whatever is due and sleeps until the next launch or a change.
// On step-up Restore rebuilds the table from state and launches once for
// every schedule missed while no leader ran it; on step-down Disable
// forgets it.
//
// A launch derives the child job (named after its scheduled time) and has
// Config.Register commit it with its eval through Raft. A job that
// prohibits overlap is not launched while a previous child still has a
// live eval or alloc; Force (Job.PeriodicForce) launches regardless.
//
// The schedule itself (when is the next launch, which launches are due,
// was one missed) is computed by pure functions of the jobs and a time;
// the dispatcher reads the clock only through Config.Now.
package periodic

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// State is what the dispatcher reads (a *state.StateStore). A nil object
// with a nil error means "not found".
type State interface {
	Jobs(ws memdb.WatchSet) ([]*structs.Job, error)
	JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error)
	JobsByParent(ws memdb.WatchSet, ns, parentID string) ([]*structs.Job, error)
	// PeriodicLaunchByID is the job's last launch record.
	PeriodicLaunchByID(ws memdb.WatchSet, ns, id string) (*structs.PeriodicLaunch, error)
	EvalsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Evaluation, error)
	AllocsByJob(ws memdb.WatchSet, ns, jobID string, anyCreateIndex bool) ([]*structs.Allocation, error)
}

// Config is the dispatcher's view of the server. Every field but Logger is
// required.
type Config struct {
	// State returns the server's current state store. It can be replaced
	// on snapshot restore, so the dispatcher calls it on each read.
	State func() State
	// Register commits a child job through Raft together with a new eval
	// of it (triggered by structs.EvalTriggerPeriodicJob) and returns the
	// eval and the entry's index. Committing the child also records the
	// parent's launch.
	Register func(child *structs.Job) (*structs.Evaluation, uint64, error)
	// Now is the clock: launch times are computed from it, and a child's
	// SubmitTime is stamped with it.
	Now func() time.Time
	// Logger logs launches (info) and failed launches (error); nil logs
	// nothing.
	Logger hclog.Logger
}

// Dispatcher launches children of periodic jobs on their schedule. Its
// methods are safe for concurrent use.
type Dispatcher struct {
	cfg Config

	mu      sync.Mutex
	enabled bool
	jobs    map[structs.NamespacedID]*structs.Job
	next    map[structs.NamespacedID]time.Time
	wake    chan struct{}
}

// New returns a disabled dispatcher of cfg.
func New(cfg Config) *Dispatcher {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Dispatcher{cfg: cfg, jobs: map[structs.NamespacedID]*structs.Job{}, next: map[structs.NamespacedID]time.Time{}, wake: make(chan struct{}, 1)}
}

// Wake makes Run look at the schedule again now (after the clock moved).
func (p *Dispatcher) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// NextLaunch is the tracked next launch of a job, or zero.
func (p *Dispatcher) NextLaunch(ns, id string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next[structs.NamespacedID{ID: id, Namespace: ns}]
}

// JobChanged is called by the FSM for every job write; it must not block.
// While disabled it does nothing.
func (p *Dispatcher) JobChanged(job *structs.Job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.enabled {
		return
	}
	id := structs.NamespacedID{ID: job.ID, Namespace: job.Namespace}
	if !job.IsPeriodicActive() {
		delete(p.jobs, id)
		delete(p.next, id)
	} else {
		p.jobs[id] = job
		if n, ok := nextLaunch(job, p.cfg.Now()); ok {
			p.next[id] = n
		}
	}
	p.Wake()
}

// JobRemoved is called by the FSM for every job delete.
func (p *Dispatcher) JobRemoved(ns, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := structs.NamespacedID{ID: id, Namespace: ns}
	delete(p.jobs, key)
	delete(p.next, key)
	p.Wake()
}

// Run is the leader loop: launch whatever is due, then wait for the next
// launch, a Wake or the end of ctx. The caller has restored the dispatcher
// before starting it and owns the goroutine; Run disables the dispatcher
// when it returns.
func (p *Dispatcher) Run(ctx context.Context) {
	defer p.Disable()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := p.cfg.Now()
		p.mu.Lock()
		launches, wait := due(p.jobs, p.next, now)
		p.mu.Unlock()
		for _, d := range launches {
			// The child is named after its scheduled time, not the moment
			// the dispatcher got to it.
			if _, _, err := p.launch(d.job, d.at, false); err != nil {
				p.cfg.Logger.Error("periodic launch failed", "job_id", d.job.ID, "error", err)
			}
		}
		if len(launches) > 0 {
			continue
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-p.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// Disable forgets every job; the FSM's calls are ignored until Restore.
func (p *Dispatcher) Disable() {
	p.mu.Lock()
	p.enabled = false
	p.jobs = map[structs.NamespacedID]*structs.Job{}
	p.next = map[structs.NamespacedID]time.Time{}
	p.mu.Unlock()
}

// Restore rebuilds the dispatcher from state on step-up and launches once
// for every schedule missed while no leader ran it. A failed read leaves the
// dispatcher disabled, and the step-up fails with it.
func (p *Dispatcher) Restore() error {
	now := p.cfg.Now()
	catchUp, err := p.load(now)
	if err != nil {
		return err
	}
	for _, j := range catchUp {
		p.cfg.Logger.Info("periodic job missed a launch; launching now", "job_id", j.ID)
		if _, _, err := p.launch(j, now, false); err != nil {
			p.cfg.Logger.Error("periodic catch-up launch failed", "job_id", j.ID, "error", err)
		}
	}
	return nil
}

// load reads the periodic jobs and enables the dispatcher, and returns the
// jobs that missed a launch. It holds mu throughout, so that a job change the
// FSM reports meanwhile waits and then applies on top of what was read.
func (p *Dispatcher) load(now time.Time) ([]*structs.Job, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.cfg.State()
	jobs, err := st.Jobs(nil)
	if err != nil {
		return nil, err
	}
	active := map[structs.NamespacedID]*structs.Job{}
	next := map[structs.NamespacedID]time.Time{}
	var catchUp []*structs.Job
	for _, j := range jobs {
		if !j.IsPeriodicActive() {
			continue
		}
		id := structs.NamespacedID{ID: j.ID, Namespace: j.Namespace}
		active[id] = j
		if n, ok := nextLaunch(j, now); ok {
			next[id] = n
		}
		l, err := st.PeriodicLaunchByID(nil, j.Namespace, j.ID)
		if err != nil {
			return nil, fmt.Errorf("periodic launch of %s: %w", id, err)
		}
		if l != nil && missedLaunch(j, l.Launch, now) {
			catchUp = append(catchUp, j)
		}
	}
	p.enabled = true
	p.jobs, p.next = active, next
	return catchUp, nil
}

// Force launches a child of job at once, regardless of its schedule and of
// prohibit_overlap (Job.PeriodicForce), and returns its eval and index.
func (p *Dispatcher) Force(job *structs.Job, at time.Time) (*structs.Evaluation, uint64, error) {
	return p.launch(job, at, true)
}

// launch derives and registers one child of a periodic job. Unless forced,
// a launch is skipped (nil eval, no error) while a previous child still
// runs and the job prohibits overlap, or when a child for this instant
// exists already; a forced launch takes the next free second instead.
func (p *Dispatcher) launch(job *structs.Job, at time.Time, force bool) (*structs.Evaluation, uint64, error) {
	st := p.cfg.State()
	if !force && job.Periodic.ProhibitOverlap {
		running, err := childRunning(st, job)
		if err != nil {
			return nil, 0, err
		}
		if running {
			p.cfg.Logger.Info("skipping periodic launch: previous instance still running", "job_id", job.ID)
			return nil, 0, nil
		}
	}
	launch := at.Unix()
	var id string
	for {
		id = childID(job.ID, launch)
		existing, err := st.JobByID(nil, job.Namespace, id)
		if err != nil {
			return nil, 0, err
		}
		if existing == nil {
			break
		}
		if !force {
			return nil, 0, nil // already launched for this instant
		}
		launch++
	}
	child := deriveChild(job, id, p.cfg.Now())
	ev, index, err := p.cfg.Register(child)
	if err != nil {
		return nil, 0, err
	}
	p.cfg.Logger.Info("periodic job launched", "job_id", job.ID, "child_id", child.ID, "eval_id", ev.ID, "forced", force)
	return ev, index, nil
}

// childRunning reports whether a periodic child of job still has a live
// eval or alloc.
func childRunning(st State, job *structs.Job) (bool, error) {
	children, err := st.JobsByParent(nil, job.Namespace, job.ID)
	if err != nil {
		return false, err
	}
	for _, c := range children {
		if !structs.IsPeriodicChild(job.ID, c.ID) {
			continue
		}
		evals, err := st.EvalsByJob(nil, c.Namespace, c.ID)
		if err != nil {
			return false, err
		}
		for _, e := range evals {
			if !e.TerminalStatus() {
				return true, nil
			}
		}
		allocs, err := st.AllocsByJob(nil, c.Namespace, c.ID, false)
		if err != nil {
			return false, err
		}
		for _, a := range allocs {
			if !a.TerminalStatus() {
				return true, nil
			}
		}
	}
	return false, nil
}

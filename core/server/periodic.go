package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// periodicDispatcher launches children of periodic jobs on their cron
// schedule. It runs on the leader only; on step-up it is rebuilt from state
// and launches once for a schedule missed while no leader ran it.
type periodicDispatcher struct {
	s *Server

	mu      sync.Mutex
	enabled bool
	jobs    map[structs.NamespacedID]*structs.Job
	next    map[structs.NamespacedID]time.Time
	wake    chan struct{}
}

func newPeriodicDispatcher(s *Server) *periodicDispatcher {
	return &periodicDispatcher{s: s, jobs: map[structs.NamespacedID]*structs.Job{}, next: map[structs.NamespacedID]time.Time{}, wake: make(chan struct{}, 1)}
}

func (p *periodicDispatcher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// jobChanged is called by the FSM for every job write; it must not block.
func (p *periodicDispatcher) jobChanged(job *structs.Job) {
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
		if n, err := job.Periodic.Next(p.s.cfg.Now()); err == nil && !n.IsZero() {
			p.next[id] = n
		}
	}
	p.poke()
}

func (p *periodicDispatcher) jobRemoved(ns, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := structs.NamespacedID{ID: id, Namespace: ns}
	delete(p.jobs, key)
	delete(p.next, key)
	p.poke()
}

// run is the leader loop: launch whatever is due. establishLeadership has
// restored the dispatcher before starting it.
func (p *periodicDispatcher) run(ctx context.Context) {
	defer p.disable()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := p.s.cfg.Now()
		due, wait := p.due(now)
		for _, d := range due {
			// The child is named after its scheduled time, not the moment
			// the dispatcher got to it.
			if _, _, err := p.launch(d.job, d.at, false); err != nil {
				p.s.logger.Error("periodic launch failed", "job_id", d.job.ID, "error", err)
			}
		}
		if len(due) > 0 {
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

type dueLaunch struct {
	job *structs.Job
	at  time.Time
}

// due returns the launches whose time has come (advancing each job's next
// launch) and how long until the next one.
func (p *periodicDispatcher) due(now time.Time) ([]dueLaunch, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []dueLaunch
	wait := time.Hour
	for id, at := range p.next {
		if !at.After(now) {
			out = append(out, dueLaunch{job: p.jobs[id], at: at})
			if n, err := p.jobs[id].Periodic.Next(now); err == nil && !n.IsZero() {
				p.next[id] = n
			} else {
				delete(p.next, id)
			}
			continue
		}
		if d := at.Sub(now); d < wait {
			wait = d
		}
	}
	return out, wait
}

// disable forgets every job; the FSM's calls are ignored until restore.
func (p *periodicDispatcher) disable() {
	p.mu.Lock()
	p.enabled = false
	p.jobs = map[structs.NamespacedID]*structs.Job{}
	p.next = map[structs.NamespacedID]time.Time{}
	p.mu.Unlock()
}

// restore rebuilds the dispatcher from state on step-up and launches once
// for every schedule missed while no leader ran it. A failed read leaves the
// dispatcher disabled, and the step-up fails with it.
func (p *periodicDispatcher) restore() error {
	now := p.s.cfg.Now()
	catchUp, err := p.load(now)
	if err != nil {
		return err
	}
	for _, j := range catchUp {
		p.s.logger.Info("periodic job missed a launch; launching now", "job_id", j.ID)
		if _, _, err := p.launch(j, now, false); err != nil {
			p.s.logger.Error("periodic catch-up launch failed", "job_id", j.ID, "error", err)
		}
	}
	return nil
}

// load reads the periodic jobs and enables the dispatcher, and returns the
// jobs that missed a launch. It holds mu throughout, so that a job change the
// FSM reports meanwhile waits and then applies on top of what was read.
func (p *periodicDispatcher) load(now time.Time) ([]*structs.Job, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.s.State()
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
		if n, err := j.Periodic.Next(now); err == nil && !n.IsZero() {
			next[id] = n
		}
		l, err := st.PeriodicLaunchByID(nil, j.Namespace, j.ID)
		if err != nil {
			return nil, fmt.Errorf("periodic launch of %s: %w", id, err)
		}
		if l != nil && !l.Launch.IsZero() {
			if missed, err := j.Periodic.Next(l.Launch); err == nil && !missed.IsZero() && missed.Before(now) {
				catchUp = append(catchUp, j)
			}
		}
	}
	p.enabled = true
	p.jobs, p.next = active, next
	return catchUp, nil
}

// launch derives and registers one child of a periodic job. Unless forced,
// a launch is skipped while a previous child still runs and the job
// prohibits overlap.
func (p *periodicDispatcher) launch(job *structs.Job, at time.Time, force bool) (*structs.Evaluation, uint64, error) {
	st := p.s.State()
	if !force && job.Periodic.ProhibitOverlap {
		running, err := p.childRunning(job)
		if err != nil {
			return nil, 0, err
		}
		if running {
			p.s.logger.Info("skipping periodic launch: previous instance still running", "job_id", job.ID)
			return nil, 0, nil
		}
	}
	launch := at.Unix()
	var id string
	for {
		id = fmt.Sprintf("%s%s%d", job.ID, structs.PeriodicLaunchSuffix, launch)
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
	child := job.Copy()
	child.ID, child.Name, child.ParentID = id, id, job.ID
	child.Periodic = nil
	child.Status, child.StatusDescription = "", ""
	child.Version, child.CreateIndex, child.ModifyIndex, child.JobModifyIndex = 0, 0, 0, 0
	child.SubmitTime = p.s.cfg.Now().UnixNano()
	ev := p.s.newEval(child, structs.EvalTriggerPeriodicJob)
	index, err := p.s.raftApply(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: child, Eval: ev, Namespace: child.Namespace, JobID: child.ID, RequireNamespace: true})
	if err != nil {
		return nil, 0, err
	}
	p.s.logger.Info("periodic job launched", "job_id", job.ID, "child_id", child.ID, "eval_id", ev.ID, "forced", force)
	return ev, index, nil
}

func (p *periodicDispatcher) childRunning(job *structs.Job) (bool, error) {
	st := p.s.State()
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

package deploywatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Config configures a Watcher.
type Config struct {
	// State returns the server's current state store (a snapshot restore
	// replaces it).
	State func() *state.StateStore
	// Apply proposes a Raft entry and returns its index; the server's
	// raftApply.
	Apply func(t structs.MessageType, msg any) (uint64, error)
	// NewEval builds a pending eval of job with the given trigger.
	NewEval func(job *structs.Job, trigger string) *structs.Evaluation
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// MaxWait bounds how long the loop waits without a change; it re-reads
	// the state at least that often (default 1 minute).
	MaxWait time.Duration
	Logger  hclog.Logger
}

// Watcher acts on active deployments (see the package doc). Run is its only
// goroutine; the caller owns it through Run's context.
type Watcher struct {
	cfg Config
	// seen is the health signature of each deployment at its last pass:
	// an eval is created when it changes. Only Run's goroutine (or a
	// test's Tick) touches it.
	seen map[string]string
}

// New returns a Watcher.
func New(cfg Config) *Watcher {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Watcher{cfg: cfg, seen: map[string]string{}}
}

// Run watches until ctx ends: a pass over every active deployment on each
// change of what the last pass read, and at the next deadline.
func (w *Watcher) Run(ctx context.Context) {
	for {
		ws := memdb.NewWatchSet()
		st := w.cfg.State()
		ws.Add(st.AbandonCh())
		next, err := w.pass(ws, st)
		wait := w.cfg.MaxWait
		if err != nil {
			w.cfg.Logger.Warn("deployment watcher pass failed; retrying", "error", err)
			wait = time.Second
		}
		if !next.IsZero() {
			if d := next.Sub(w.cfg.Now()); d < wait {
				wait = max(d, 10*time.Millisecond)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		_ = ws.WatchCtx(wctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
	}
}

// Tick makes one pass now (tests drive the watcher with it and a fake
// clock).
func (w *Watcher) Tick() error {
	_, err := w.pass(memdb.NewWatchSet(), w.cfg.State())
	return err
}

// pass decides and acts for every active deployment and returns the
// earliest deadline ahead.
func (w *Watcher) pass(ws memdb.WatchSet, st *state.StateStore) (time.Time, error) {
	active, err := st.ActiveDeployments(ws)
	if err != nil {
		return time.Time{}, err
	}
	var next time.Time
	var errs []error
	live := make(map[string]bool, len(active))
	for _, d := range active {
		live[d.ID] = true
		n, err := w.watch(ws, st, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("deployment %s: %w", d.ID, err))
		}
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	for id := range w.seen {
		if !live[id] {
			delete(w.seen, id)
		}
	}
	return next, errors.Join(errs...)
}

// signature is what of a deployment makes an eval when it changes: the
// health counts. Placements alone do not (the plan that placed them knows),
// nor does a promotion (its entry carries its own eval).
func signature(d *structs.Deployment) string {
	s := ""
	for _, name := range d.SortedGroups() {
		g := d.TaskGroups[name]
		s += fmt.Sprintf("%s:%d/%d;", name, g.HealthyAllocs, g.UnhealthyAllocs)
	}
	return s
}

func (w *Watcher) watch(ws memdb.WatchSet, st *state.StateStore, d *structs.Deployment) (time.Time, error) {
	job, err := st.JobByID(ws, d.Namespace, d.JobID)
	if err != nil {
		return time.Time{}, err
	}
	sig := signature(d)
	prev, known := w.seen[d.ID]
	// A deployment first seen (new, or this server just took over)
	// counts as changed once it has health to act on.
	changed := (known && prev != sig) || (!known && hasHealth(d))
	dec := Decide(d, job, w.cfg.Now(), changed)
	log := w.cfg.Logger.With("deployment_id", d.ID, "namespace", d.Namespace, "job_id", d.JobID)
	if dec.Action == None || dec.Action == Eval {
		marked, err := w.markReplacements(ws, st, d, job, log)
		if err != nil {
			return time.Time{}, err
		}
		if marked {
			// The marks' entry carries the eval the change asked for.
			w.seen[d.ID] = sig
			return dec.Next, nil
		}
	}
	switch dec.Action {
	case None:
		w.seen[d.ID] = sig
		return dec.Next, nil
	case Eval:
		ev := w.cfg.NewEval(job, structs.EvalTriggerDeploymentWatcher)
		ev.JobModifyIndex = job.JobModifyIndex
		ev.DeploymentID = d.ID
		if _, err := w.cfg.Apply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{ev}}); err != nil {
			return time.Time{}, err
		}
		log.Debug("deployment progressed; evaluating its job", "eval_id", ev.ID)
	case Promote:
		ev := w.cfg.NewEval(job, structs.EvalTriggerDeploymentWatcher)
		ev.JobModifyIndex = job.JobModifyIndex
		ev.DeploymentID = d.ID
		if _, err := w.cfg.Apply(structs.DeploymentPromoteRequestType, &structs.DeploymentPromoteRequest{DeploymentID: d.ID, All: true, Eval: ev}); err != nil {
			return time.Time{}, err
		}
		log.Info("deployment canaries auto-promoted", "eval_id", ev.ID)
	case Fail:
		req, err := FailRequest(st, d, job, dec.Description, dec.AutoRevert, w.cfg.NewEval, w.cfg.Now())
		if err != nil {
			return time.Time{}, err
		}
		if _, err := w.cfg.Apply(structs.DeploymentStatusUpdateRequestType, req); err != nil {
			return time.Time{}, err
		}
		log.Info("deployment failed", "reason", req.DeploymentUpdate.StatusDescription, "reverted", req.Job != nil)
	default: // Cancel, Succeed, Describe
		status := map[Action]string{Cancel: structs.DeploymentStatusCancelled, Succeed: structs.DeploymentStatusSuccessful,
			Describe: structs.DeploymentStatusRunning}[dec.Action]
		req := &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{
			DeploymentID: d.ID, Status: status, StatusDescription: dec.Description,
		}}
		if _, err := w.cfg.Apply(structs.DeploymentStatusUpdateRequestType, req); err != nil {
			return time.Time{}, err
		}
		log.Info("deployment status changed", "status", status, "description", dec.Description)
	}
	w.seen[d.ID] = sig
	return dec.Next, nil
}

// markReplacements marks the allocations of d that Replacements names,
// with an eval of the job in the same entry so that its scheduler
// replaces them, and reports whether there were any.
func (w *Watcher) markReplacements(ws memdb.WatchSet, st *state.StateStore, d *structs.Deployment, job *structs.Job, log hclog.Logger) (bool, error) {
	allocs, err := st.AllocsByDeployment(ws, d)
	if err != nil {
		return false, err
	}
	ids := Replacements(d, allocs)
	if len(ids) == 0 {
		return false, nil
	}
	yes := true
	marks := make(map[string]*structs.DesiredTransition, len(ids))
	for _, id := range ids {
		marks[id] = &structs.DesiredTransition{Reschedule: &yes}
	}
	ev := w.cfg.NewEval(job, structs.EvalTriggerDeploymentWatcher)
	ev.JobModifyIndex = job.JobModifyIndex
	ev.DeploymentID = d.ID
	req := &structs.AllocUpdateDesiredTransitionRequest{Allocs: marks, Evals: []*structs.Evaluation{ev}}
	if _, err := w.cfg.Apply(structs.AllocUpdateDesiredTransitionRequestType, req); err != nil {
		return false, err
	}
	log.Debug("unhealthy allocations marked for replacement", "count", len(ids), "eval_id", ev.ID)
	return true, nil
}

func hasHealth(d *structs.Deployment) bool {
	for _, g := range d.TaskGroups {
		if g.HealthyAllocs > 0 || g.UnhealthyAllocs > 0 {
			return true
		}
	}
	return false
}

// FailRequest builds the entry that fails d with desc: with revert, the
// job's newest stable version before d's is registered again as a new
// version (the description says so, or that there is none), and an eval of
// the job lets its scheduler act on the failure. The watcher and the fail
// endpoint share it.
func FailRequest(st *state.StateStore, d *structs.Deployment, job *structs.Job, desc string, revert bool,
	newEval func(*structs.Job, string) *structs.Evaluation, now time.Time) (*structs.DeploymentStatusUpdateRequest, error) {
	req := &structs.DeploymentStatusUpdateRequest{DeploymentUpdate: &structs.DeploymentStatusUpdate{
		DeploymentID: d.ID, Status: structs.DeploymentStatusFailed, StatusDescription: desc,
	}}
	if job == nil || job.Stop {
		return req, nil
	}
	if revert {
		versions, err := st.JobVersionsByID(nil, d.Namespace, d.JobID)
		if err != nil {
			return nil, err
		}
		if target := RevertTarget(versions, d.JobVersion); target != nil && job.Version == d.JobVersion {
			j := target.Copy()
			j.Stable = false
			j.Status, j.StatusDescription = "", ""
			j.SubmitTime = now.UnixNano()
			req.Job = j
			req.DeploymentUpdate.StatusDescription = structs.DeploymentStatusDescriptionRollback(desc, target.Version)
		} else if target == nil {
			req.DeploymentUpdate.StatusDescription = structs.DeploymentStatusDescriptionNoRollbackTarget(desc)
		}
	}
	ev := newEval(job, structs.EvalTriggerDeploymentWatcher)
	ev.DeploymentID = d.ID
	if req.Job == nil {
		ev.JobModifyIndex = job.JobModifyIndex
	}
	req.Eval = ev
	return req, nil
}

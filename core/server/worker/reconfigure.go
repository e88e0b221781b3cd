package worker

import (
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// CoreType is Nomad's "_core" scheduler (its garbage collection evals).
// drover's collector runs on the leader rather than through the workers,
// but an enabled scheduler list must name it, as Nomad's must.
const CoreType = "_core"

// Bounds of Reconfigure's input.
const (
	// MaxWorkers bounds the number of workers (server.num_schedulers has
	// the same bound).
	MaxWorkers = 128
	// maxEnabled bounds the enabled scheduler list.
	maxEnabled = 64
)

// slot is one running worker as the pool tracks it.
type slot struct {
	id    int
	state *workerState
	// stop, closed, stops the worker once its eval in hand is done.
	stop chan struct{}
}

// Enabled returns the job types the workers take, with "_core", as
// Reconfigure set them; nil while they take every type (also after a
// Reconfigure naming every served type).
func (p *Pool) Enabled() []string {
	p.statesMu.Lock()
	defer p.statesMu.Unlock()
	return slices.Clone(p.enabled)
}

// Reconfigure sets the number of workers and the job types they take, as
// Nomad's /v1/agent/schedulers/config does: num may be 0 (this server
// schedules nothing) and enabled must name "_core" and otherwise only job
// types some scheduler plugin serves now. Workers are added or removed to
// match num; when the types change every worker is replaced. A removed
// worker finishes the eval it holds. The change lasts until the agent
// restarts. Before Run it sets what Run starts.
func (p *Pool) Reconfigure(num int, enabled []string) error {
	if num < 0 || num > MaxWorkers {
		return structs.NewError(structs.ErrInvalid, "num_schedulers: must be from 0 to %d, got %d", MaxWorkers, num)
	}
	if len(enabled) > maxEnabled {
		return structs.NewError(structs.ErrInvalid, "enabled_schedulers: at most %d entries, got %d", maxEnabled, len(enabled))
	}
	served := p.ServedTypes()
	var list []string
	for _, t := range enabled {
		if slices.Contains(list, t) {
			continue
		}
		if t != CoreType && !slices.Contains(served, t) {
			return structs.NewError(structs.ErrInvalid, "enabled_schedulers: %q is not a job type any scheduler plugin serves (%s)", t, strings.Join(served, ", "))
		}
		list = append(list, t)
	}
	if !slices.Contains(list, CoreType) {
		return structs.NewError(structs.ErrInvalid, "enabled_schedulers: must include %q", CoreType)
	}
	if coversAll(list, served) {
		// Every served type: the workers keep taking every type, also one
		// a plugin declares later (the list GET answers is the same).
		list = nil
	}
	p.statesMu.Lock()
	defer p.statesMu.Unlock()
	if p.stopped {
		return structs.NewError(structs.ErrUnavailable, "the server is shutting down")
	}
	restart := !sameTypes(p.enabled, list)
	if !restart && num == p.num {
		return nil
	}
	p.num, p.enabled = num, list
	if p.runCtx != nil {
		p.applyLocked(restart)
	}
	p.logger.Info("scheduler workers reconfigured", "num_schedulers", num, "enabled_schedulers", list)
	return nil
}

// coversAll reports whether list names every served type.
func coversAll(list, served []string) bool {
	for _, t := range served {
		if !slices.Contains(list, t) {
			return false
		}
	}
	return true
}

// sameTypes reports whether a and b name the same types; nil (every type)
// equals only nil.
func sameTypes(a, b []string) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// applyLocked starts and stops workers to match p.num, replacing every
// worker when restart is set (their types changed). The caller holds
// statesMu, Run has started and has not stopped.
func (p *Pool) applyLocked(restart bool) {
	if restart {
		for _, sl := range p.current {
			close(sl.stop)
		}
		p.current = nil
	}
	for len(p.current) > p.num {
		last := p.current[len(p.current)-1]
		close(last.stop)
		p.current = p.current[:len(p.current)-1]
	}
	for len(p.current) < p.num {
		p.startLocked()
	}
}

// startLocked starts one worker taking the enabled types.
func (p *Pool) startLocked() {
	w := p.newWorker(p.nextID)
	p.nextID++
	if p.enabled != nil {
		w.types = map[string]bool{}
		for _, t := range p.enabled {
			w.types[t] = true
		}
	}
	sl := &slot{id: w.id, state: w.state, stop: make(chan struct{})}
	sl.state.started.Store(time.Now().UnixNano())
	sl.state.set(StatusStarted, WorkloadWaitingToDequeue)
	ctx := p.runCtx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer sl.state.set(StatusStopped, WorkloadStopped)
		w.run(ctx, sl.stop)
	}()
	p.current = append(p.current, sl)
}

package worker

import (
	"strconv"
	"sync/atomic"
	"time"
)

// Worker statuses as Nomad's /v1/agent/schedulers shows them: Status is
// the worker's life, WorkloadStatus what it is doing now.
const (
	StatusStarting = "Starting"
	StatusStarted  = "Started"
	StatusStopped  = "Stopped"

	WorkloadStarting         = "Starting"
	WorkloadWaitingToDequeue = "WaitingToDequeue"
	WorkloadScheduling       = "Scheduling"
	WorkloadStopped          = "Stopped"
)

// Info describes one scheduler worker (spares standing in for a worker
// held by a slow plugin call are not listed: they come and go).
type Info struct {
	ID             string
	Started        time.Time
	Status         string
	WorkloadStatus string
}

// workerState is one worker's status, read by Info while the worker runs.
type workerState struct {
	started  atomic.Int64 // UnixNano, 0 before the worker runs
	status   atomic.Value // string
	workload atomic.Value // string
}

func (st *workerState) set(status, workload string) {
	st.status.Store(status)
	st.workload.Store(workload)
}

// Info lists the pool's workers in ID order: none before Run.
func (p *Pool) Info() []Info {
	p.statesMu.Lock()
	states := p.states
	p.statesMu.Unlock()
	out := make([]Info, 0, len(states))
	for i, st := range states {
		info := Info{ID: strconv.Itoa(i), Status: StatusStarting, WorkloadStatus: WorkloadStarting}
		if ns := st.started.Load(); ns != 0 {
			info.Started = time.Unix(0, ns).UTC()
		}
		if v, ok := st.status.Load().(string); ok {
			info.Status = v
		}
		if v, ok := st.workload.Load().(string); ok {
			info.WorkloadStatus = v
		}
		out = append(out, info)
	}
	return out
}

// Workers is the number of workers Run starts.
func (p *Pool) Workers() int { return p.cfg.Workers }

// ServedTypes lists the job types some scheduler plugin serves now: the
// schedulers the workers run.
func (p *Pool) ServedTypes() []string {
	if p.cfg.Schedulers == nil {
		return nil
	}
	return p.cfg.Schedulers.ServedTypes()
}

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

// Info lists the pool's running workers in start order: none before Run.
func (p *Pool) Info() []Info {
	p.statesMu.Lock()
	slots := append([]*slot(nil), p.current...)
	p.statesMu.Unlock()
	out := make([]Info, 0, len(slots))
	for _, sl := range slots {
		st := sl.state
		info := Info{ID: strconv.Itoa(sl.id), Status: StatusStarting, WorkloadStatus: WorkloadStarting}
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

// Workers is the number of workers the pool runs (Config.Workers until
// Reconfigure changes it).
func (p *Pool) Workers() int {
	p.statesMu.Lock()
	defer p.statesMu.Unlock()
	return p.num
}

// ServedTypes lists the job types some scheduler plugin serves now: the
// schedulers the workers run.
func (p *Pool) ServedTypes() []string {
	if p.cfg.Schedulers == nil {
		return nil
	}
	return p.cfg.Schedulers.ServedTypes()
}

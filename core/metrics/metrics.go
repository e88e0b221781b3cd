// Package metrics holds an agent's Prometheus metrics: one registry per
// agent (never the global one, so that several agents in one process do
// not collide), the instruments the core observes at its seams, and the
// scrape-time collectors that read counts the components already keep.
//
// Naming follows Prometheus: the drover_ prefix, base units (_seconds),
// _total on counters. No label ever carries an ID (job, alloc, eval, node):
// labels are bounded sets (eval and job types of the loaded plugins, route
// patterns, status classes, object kinds).
//
// Every method is safe on a nil *Metrics, which observes nothing: servers
// and clients built without metrics (most tests) pay one nil check.
package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "drover"

// latencyBuckets spans 100µs to ~10s, the range of an apply, a plan or a
// scheduler call.
var latencyBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 13)

// Metrics is one agent's instruments and registry.
type Metrics struct {
	Registry *prometheus.Registry

	raftApply         prometheus.Histogram
	raftLeaderChanges prometheus.Counter

	schedCall   *prometheus.HistogramVec
	schedErrors *prometheus.CounterVec
	evalsHeld   *prometheus.CounterVec

	planApply         prometheus.Histogram
	planNodesRejected prometheus.Counter

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec

	gcReaped *prometheus.CounterVec
	gcRun    *prometheus.HistogramVec

	taskRestarts prometheus.Counter
}

// New returns an agent's metrics on a fresh registry, with the Go runtime
// and process collectors.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.raftApply = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "raft", Name: "apply_duration_seconds",
		Help:    "Time from proposing a Raft entry on the leader to its commit and application.",
		Buckets: latencyBuckets,
	})
	m.raftLeaderChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "raft", Name: "leader_changes_total",
		Help: "Times this server gained or lost leadership.",
	})
	m.schedCall = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "scheduler", Name: "call_duration_seconds",
		Help:    "Duration of scheduler plugin calls, by plugin and job type.",
		Buckets: latencyBuckets,
	}, []string{"plugin", "job_type"})
	m.schedErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "scheduler", Name: "call_errors_total",
		Help: "Scheduler plugin calls that failed, by plugin and job type.",
	}, []string{"plugin", "job_type"})
	m.evalsHeld = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "scheduler", Name: "evals_held_total",
		Help: "Times an eval was handed back to wait because no scheduler plugin serves its job type, by job type.",
	}, []string{"job_type"})
	m.planApply = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "plan", Name: "apply_duration_seconds",
		Help:    "Time the plan applier spends on one plan: evaluation against the latest state and the Raft commit.",
		Buckets: latencyBuckets,
	})
	m.planNodesRejected = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "plan", Name: "nodes_rejected_total",
		Help: "Nodes of submitted plans that the plan applier refused (no longer fit or not ready).",
	})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "http", Name: "requests_total",
		Help: "HTTP API requests, by route pattern and status class.",
	}, []string{"route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "http", Name: "request_duration_seconds",
		Help:    "HTTP API request latency, by route pattern and status class (streams count their whole life).",
		Buckets: latencyBuckets,
	}, []string{"route", "code"})
	m.gcReaped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "gc", Name: "objects_reaped_total",
		Help: "Objects garbage-collected, by kind.",
	}, []string{"kind"})
	m.gcRun = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "gc", Name: "run_duration_seconds",
		Help:    "Duration of one garbage collection run, by collection.",
		Buckets: prometheus.ExponentialBuckets(0.001, 3, 12),
	}, []string{"collection"})
	m.taskRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "client", Name: "task_restarts_total",
		Help: "Task restarts by this client's restart policies.",
	})
	m.Registry.MustRegister(
		m.raftApply, m.raftLeaderChanges, m.schedCall, m.schedErrors, m.evalsHeld,
		m.planApply, m.planNodesRejected, m.httpRequests, m.httpDuration, m.gcReaped, m.gcRun,
		m.taskRestarts,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: namespace}),
	)
	return m
}

// RaftApplied observes one entry's propose-to-apply time.
func (m *Metrics) RaftApplied(d time.Duration) {
	if m != nil {
		m.raftApply.Observe(d.Seconds())
	}
}

// LeaderChanged counts a gain or loss of leadership.
func (m *Metrics) LeaderChanged() {
	if m != nil {
		m.raftLeaderChanges.Inc()
	}
}

// SchedulerCall observes one scheduler plugin call.
func (m *Metrics) SchedulerCall(plugin, jobType string, d time.Duration, failed bool) {
	if m == nil {
		return
	}
	m.schedCall.WithLabelValues(plugin, jobType).Observe(d.Seconds())
	if failed {
		m.schedErrors.WithLabelValues(plugin, jobType).Inc()
	}
}

// EvalHeld counts an eval handed back because no scheduler plugin serves
// its job type right now.
func (m *Metrics) EvalHeld(jobType string) {
	if m != nil {
		m.evalsHeld.WithLabelValues(jobType).Inc()
	}
}

// PlanApplied observes one plan's apply time and its rejected nodes.
func (m *Metrics) PlanApplied(d time.Duration, rejectedNodes int) {
	if m == nil {
		return
	}
	m.planApply.Observe(d.Seconds())
	if rejectedNodes > 0 {
		m.planNodesRejected.Add(float64(rejectedNodes))
	}
}

// HTTPRequest observes one request; route is its ServeMux pattern (or
// "unmatched", "forwarded"), never its path.
func (m *Metrics) HTTPRequest(route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	code := statusClass(status)
	m.httpRequests.WithLabelValues(route, code).Inc()
	m.httpDuration.WithLabelValues(route, code).Observe(d.Seconds())
}

var classes = [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

func statusClass(status int) string {
	if c := status/100 - 1; c >= 0 && c < len(classes) {
		return classes[c]
	}
	return strconv.Itoa(status)
}

// GCReaped counts objects of kind ("evals", "allocs", "jobs", "nodes",
// ...) that a GC run deleted.
func (m *Metrics) GCReaped(kind string, n int) {
	if m != nil && n > 0 {
		m.gcReaped.WithLabelValues(kind).Add(float64(n))
	}
}

// GCRun observes one GC collection's duration.
func (m *Metrics) GCRun(collection string, d time.Duration) {
	if m != nil {
		m.gcRun.WithLabelValues(collection).Observe(d.Seconds())
	}
}

// TaskRestarted counts a task restart on a client.
func (m *Metrics) TaskRestarted() {
	if m != nil {
		m.taskRestarts.Inc()
	}
}

// Register adds a component's scrape-time collector; nil-safe.
func (m *Metrics) Register(c prometheus.Collector) {
	if m != nil {
		m.Registry.MustRegister(c)
	}
}

// Package worker holds the server's scheduler workers: each takes evals
// from the eval broker, snapshots state at the eval's index, builds the
// scheduler request (schedio), calls the scheduler plugin serving the
// eval's type, submits the plan, retries on partial commits and records
// the eval's outcome with its blocked and follow-up evals.
//
// A plugin call is bounded by Config.CallTimeout. A call unanswered for
// Config.SlowCall degrades its type (see typeGate: one worker at a time
// serves it) and a spare worker stands in for the held one until the
// call returns, so a hung plugin never holds up the evals of other types.
//
// An eval whose job type no plugin serves right now is held until one
// does (hold.go), never failed for it.
//
// Workers run on every server; the broker hands out evals only on the
// leader, so a follower's workers wait.
package worker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/scheduler"
)

// Defaults of Config.CallTimeout and Config.SlowCall. A 10,000-node
// sysbatch eval takes well under a second.
const (
	DefaultCallTimeout = time.Minute
	DefaultSlowCall    = 5 * time.Second
)

// Broker is the eval broker as the workers use it (*evalbroker.Broker).
type Broker interface {
	// DequeueFunc blocks for an eval of a type admit accepts.
	DequeueFunc(ctx context.Context, admit func(evalType string) bool) (*structs.Evaluation, string, error)
	Ack(evalID, token string) error
	Nack(evalID, token string) error
	// Requeue hands an eval back without spending a delivery.
	Requeue(evalID, token string, delay time.Duration) error
	PauseNackTimeout(evalID, token string) error
	ResumeNackTimeout(evalID, token string) error
}

// Router finds the scheduler plugin serving a job type (the server's
// SchedulerRouter).
type Router interface {
	// Lookup returns the scheduler serving jobType and its attempt limit;
	// an error wrapping structs.ErrUnavailable while the plugin restarts,
	// any other error while no plugin serves jobType (the eval is held).
	Lookup(jobType string) (scheduler.Scheduler, int, error)
	// ServedTypes lists the job types some plugin serves, sorted.
	ServedTypes() []string
}

// Metrics records scheduler plugin calls (*metrics.Metrics). One that
// also has EvalHeld(jobType string) counts the evals held because no
// plugin serves their type (hold.go).
type Metrics interface {
	SchedulerCall(plugin, jobType string, d time.Duration, failed bool)
}

// Config is what the workers need.
type Config struct {
	// Workers is the number of workers Run starts (zero: one);
	// Reconfigure changes it.
	Workers    int
	Broker     Broker
	Schedulers Router
	// Snapshot returns a state snapshot whose index is at least index.
	Snapshot func(ctx context.Context, index uint64) (*state.StateSnapshot, error)
	// State returns the server's current state store (a snapshot restore
	// replaces it); placement failures are explained from it.
	State func() *state.StateStore
	// NodeCache caches the scheduler's view of nodes across requests.
	NodeCache *schedio.NodeCache
	// SubmitPlan hands a plan to the leader's plan applier and waits for
	// its result.
	SubmitPlan func(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, error)
	// Apply proposes a Raft entry and returns its index (the server's
	// raftApply); evals are recorded with it.
	Apply func(t structs.MessageType, msg any) (uint64, error)
	// CallTimeout bounds one plugin call (zero: DefaultCallTimeout);
	// SlowCall is how long a call may go unanswered before its type is
	// degraded and a spare stands in (zero: DefaultSlowCall).
	CallTimeout, SlowCall time.Duration
	// MaxAllocsPerEval and MaxAllocsPerJob are the allocation limits
	// enforced on each plan (capPlacements).
	MaxAllocsPerEval, MaxAllocsPerJob int
	// InitialNackDelay is the broker's first nack delay, which an eval
	// whose plugin was found down waits (zero: the broker's default).
	InitialNackDelay time.Duration
	// MaxHoldDelay bounds the delay between two tries of an eval whose job
	// type no plugin serves (hold.go; zero: DefaultMaxHoldDelay).
	MaxHoldDelay time.Duration
	// Now is the clock evals are stamped with (nil: time.Now).
	Now     func() time.Time
	Metrics Metrics
	Logger  hclog.Logger
}

// Pool is the server's scheduler workers.
type Pool struct {
	cfg    Config
	logger hclog.Logger
	gate   *typeGate
	// spares counts the spare workers standing in for workers held by
	// slow plugin calls (watchSlowCall).
	spares atomic.Int32
	// reasons: why each eval's last delivery failed.
	reasons reasonLog
	// held: how many times in a row each eval was held (hold.go).
	held holdLog
	// wg counts the running workers and spares.
	wg sync.WaitGroup
	// statesMu guards the fields below: the running workers (Info) and
	// their configuration (Reconfigure).
	statesMu sync.Mutex
	// runCtx is Run's context (nil before Run); stopped is set once it
	// ended.
	runCtx  context.Context
	stopped bool
	// current are the running workers, in start order; a worker removed
	// by Reconfigure finishes its eval unlisted.
	current []*slot
	// nextID is the ID of the next worker started.
	nextID int
	// num is the number of workers wanted; enabled the job types they
	// take, with "_core" (nil: every type).
	num     int
	enabled []string
}

type noMetrics struct{}

func (noMetrics) SchedulerCall(string, string, time.Duration, bool) {}

// New returns the workers; none runs until Run.
func New(cfg Config) *Pool {
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.SlowCall <= 0 {
		cfg.SlowCall = DefaultSlowCall
	}
	if cfg.MaxHoldDelay <= 0 {
		cfg.MaxHoldDelay = DefaultMaxHoldDelay
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Pool{cfg: cfg, logger: cfg.Logger.Named("worker"), gate: newTypeGate(), num: cfg.Workers}
}

// Run runs the workers until ctx ends and returns once every worker and
// spare has returned. It is called once. Reconfigure changes the workers
// while it runs.
func (p *Pool) Run(ctx context.Context) {
	p.statesMu.Lock()
	p.runCtx = ctx
	p.applyLocked(false)
	p.statesMu.Unlock()
	<-ctx.Done()
	p.statesMu.Lock()
	// No worker is started from now on, so no wg.Add races the Wait.
	p.stopped = true
	p.statesMu.Unlock()
	p.wg.Wait()
}

// TakeNackReason returns and forgets why the eval's last delivery was
// nacked ("" if it was not), for the description of an eval failed at the
// delivery limit.
func (p *Pool) TakeNackReason(evalID string) string { return p.reasons.take(evalID) }

// reasonLog remembers why each eval's last delivery was nacked, so that an
// eval failed at the delivery limit tells the operator what went wrong
// instead of only that something did.
type reasonLog struct {
	mu sync.Mutex
	m  map[string]string
}

// maxReasons bounds the log: evals nacked on a leader that then lost
// leadership are never taken.
const maxReasons = 10000

func (r *reasonLog) set(evalID, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= maxReasons {
		r.m = map[string]string{}
	}
	r.m[evalID] = reason
}

func (r *reasonLog) take(evalID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	reason := r.m[evalID]
	delete(r.m, evalID)
	return reason
}

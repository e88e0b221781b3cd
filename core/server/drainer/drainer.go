package drainer

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// DefaultInterval is how often Run makes a pass by default.
const DefaultInterval = time.Second

// Config configures a Drainer.
type Config struct {
	// State returns the server's current state store (a snapshot restore
	// replaces it).
	State func() *state.StateStore
	// Apply proposes a Raft entry and returns its index; the server's
	// raftApply.
	Apply func(t structs.MessageType, msg any) (uint64, error)
	// NewEval builds a pending eval of job with the given trigger.
	NewEval func(job *structs.Job, trigger string) *structs.Evaluation
	// Now is the clock drain deadlines are judged by; nil: time.Now.
	Now func() time.Time
	// Interval is the time between Run's passes (default
	// DefaultInterval).
	Interval time.Duration
	Logger   hclog.Logger
}

// Drainer advances every active drain (see the package doc). It outlives
// leadership terms: what it acted past is kept from one term to the next.
type Drainer struct {
	cfg Config
	// mu serializes passes; actedPast, which it guards, is the drain
	// deadline each node's allocations were last evaluated past.
	mu        sync.Mutex
	actedPast map[string]time.Time
}

// New returns a Drainer.
func New(cfg Config) *Drainer {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Drainer{cfg: cfg, actedPast: map[string]time.Time{}}
}

// Run makes a pass every Interval until ctx (the leadership term) ends.
func (d *Drainer) Run(ctx context.Context) {
	t := time.NewTicker(d.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.Tick()
		}
	}
}

// Tick makes one pass over every draining node now: it decides (Decide)
// and applies the decision. Failures are logged and retried on the next
// pass.
func (d *Drainer) Tick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.cfg.State()
	nodes, err := st.Nodes(nil)
	if err != nil {
		d.cfg.Logger.Error("drainer failed to read nodes", "error", err)
		return
	}
	now := d.cfg.Now()
	before := d.actedPast
	d.actedPast = map[string]time.Time{}
	for _, n := range nodes {
		ds := n.DrainStrategy
		if ds == nil {
			continue
		}
		if forced, forcedNow := pastDeadline(ds, now, before[n.ID]); forced && !forcedNow {
			d.actedPast[n.ID] = ds.ForceDeadline // still acted past
		}
		allocs, err := st.AllocsByNode(nil, n.ID)
		if err != nil {
			d.cfg.Logger.Error("drainer failed to read the node's allocs", "node_id", n.ID, "error", err)
			continue
		}
		dec := Decide(n, allocs, now, before[n.ID])
		if dec.Complete {
			_, err := d.cfg.Apply(structs.NodeUpdateDrainRequestType, &structs.NodeUpdateDrainRequest{
				NodeID: n.ID, UpdatedAt: now.Unix(),
				NodeEvent: &structs.NodeEvent{Message: "Node drain complete", Subsystem: "Drain", Timestamp: now},
			})
			if err != nil {
				d.cfg.Logger.Warn("failed to complete drain", "node_id", n.ID, "error", err)
			} else {
				d.cfg.Logger.Info("node drain complete", "node_id", n.ID)
			}
			continue
		}
		if len(dec.Migrate) == 0 {
			if dec.ForcedNow {
				d.actedPast[n.ID] = ds.ForceDeadline
			}
			continue
		}
		req, err := d.migration(st, n.ID, dec.Migrate)
		if err != nil {
			// Migrating without the jobs' evals would mark allocs that
			// nothing reschedules: the next pass tries again.
			d.cfg.Logger.Error("drainer failed to read the jobs to migrate", "node_id", n.ID, "error", err)
			continue
		}
		if _, err := d.cfg.Apply(structs.AllocUpdateDesiredTransitionRequestType, req); err != nil {
			d.cfg.Logger.Warn("failed to migrate allocs for drain", "node_id", n.ID, "error", err)
			continue
		}
		if dec.ForcedNow {
			d.actedPast[n.ID] = ds.ForceDeadline
		}
	}
}

// migration marks allocs for migration off a draining node, with one
// drain eval per job that acts on them.
func (d *Drainer) migration(st *state.StateStore, nodeID string, migrate []*structs.Allocation) (*structs.AllocUpdateDesiredTransitionRequest, error) {
	yes := true
	req := &structs.AllocUpdateDesiredTransitionRequest{Allocs: map[string]*structs.DesiredTransition{}}
	jobs := map[structs.NamespacedID]bool{}
	for _, a := range migrate {
		req.Allocs[a.ID] = &structs.DesiredTransition{Migrate: &yes}
		key := structs.NamespacedID{ID: a.JobID, Namespace: a.Namespace}
		if jobs[key] {
			continue
		}
		jobs[key] = true
		j, err := st.JobByID(nil, a.Namespace, a.JobID)
		if err != nil {
			return nil, err
		}
		if j != nil {
			ev := d.cfg.NewEval(j, structs.EvalTriggerNodeDrain)
			ev.JobModifyIndex, ev.NodeID = j.JobModifyIndex, nodeID
			req.Evals = append(req.Evals, ev)
		}
	}
	return req, nil
}

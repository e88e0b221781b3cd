// Package heartbeats is the leader's node heartbeat tracker.
//
// Every node that is not down has a timer of TTL plus Grace, restarted by
// each of its heartbeats (Reset). A timer that lapses marks its node down
// (Config.MarkDown, which writes the status and the node-update evals).
// The Tracker is leader-owned: Run, started at step-up and stopped by
// ending its context, arms a fresh timer for every live node, so a new
// leader never marks nodes down for the old leader's gap, and drops every
// timer when it returns; Reset is ignored while Run is not running.
package heartbeats

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// Timer is a started timer (*time.Timer is one).
type Timer interface{ Stop() bool }

// Config is what a Tracker needs.
type Config struct {
	// TTL is the heartbeat TTL clients honour; Grace is added to it
	// before a node is marked down.
	TTL, Grace time.Duration
	// Nodes lists the stored nodes; Node reads one (nil: no such node).
	Nodes func() ([]*structs.Node, error)
	Node  func(id string) (*structs.Node, error)
	// MarkDown marks a node whose heartbeat lapsed down.
	MarkDown func(*structs.Node) error
	Logger   hclog.Logger
	// AfterFunc starts a timer (nil: time.AfterFunc); tests inject a clock.
	AfterFunc func(d time.Duration, f func()) Timer
	// Retry is how often Run retries arming the timers after a failed read
	// of the nodes (zero: a second).
	Retry time.Duration
}

// Tracker holds the per-node timers.
type Tracker struct {
	cfg Config

	mu      sync.Mutex
	enabled bool
	timers  map[string]Timer
	expired map[string]bool
	wake    chan struct{}
}

// New returns a Tracker; it tracks nothing until Run.
func New(cfg Config) *Tracker {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	return &Tracker{cfg: cfg, timers: map[string]Timer{}, expired: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// Reset restarts a node's timer (a heartbeat, a registration). It does
// nothing while Run is not running.
func (h *Tracker) Reset(nodeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.enabled {
		return
	}
	if t, ok := h.timers[nodeID]; ok {
		t.Stop()
	}
	h.timers[nodeID] = h.cfg.AfterFunc(h.cfg.TTL+h.cfg.Grace, func() {
		h.mu.Lock()
		h.expired[nodeID] = true
		h.mu.Unlock()
		select {
		case h.wake <- struct{}{}:
		default:
		}
	})
}

// Run tracks heartbeats until ctx ends, marking down the nodes whose
// timers lapse, then stops every timer.
func (h *Tracker) Run(ctx context.Context) {
	h.mu.Lock()
	h.enabled = true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.enabled = false
		for id, t := range h.timers {
			t.Stop()
			delete(h.timers, id)
		}
		h.expired = map[string]bool{}
		h.mu.Unlock()
	}()
	// Until every live node has a timer, a node that stopped heartbeating
	// under the previous leader would never be marked down: a failed read
	// is retried on every tick.
	armed := h.armTimers()
	retry := time.NewTicker(h.cfg.Retry)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			if !armed {
				armed = h.armTimers()
			}
		case <-h.wake:
			for _, id := range h.takeExpired() {
				h.invalidate(id)
			}
		}
	}
}

// takeExpired returns the nodes whose timers lapsed and forgets them.
func (h *Tracker) takeExpired() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.expired))
	for id := range h.expired {
		ids = append(ids, id)
		delete(h.timers, id)
	}
	h.expired = map[string]bool{}
	return ids
}

// armTimers starts a heartbeat timer for every node that is not down and
// reports whether it could read them.
func (h *Tracker) armTimers() bool {
	nodes, err := h.cfg.Nodes()
	if err != nil {
		h.cfg.Logger.Error("failed to read nodes to arm heartbeat timers; retrying", "error", err)
		return false
	}
	for _, n := range nodes {
		if n.Status != structs.NodeStatusDown {
			h.Reset(n.ID)
		}
	}
	return true
}

func (h *Tracker) invalidate(nodeID string) {
	node, err := h.cfg.Node(nodeID)
	if err != nil {
		// Arm the timer again so that the node is checked once more.
		h.cfg.Logger.Error("failed to read node whose heartbeat expired", "node_id", nodeID, "error", err)
		h.Reset(nodeID)
		return
	}
	if node == nil || node.Status == structs.NodeStatusDown {
		return
	}
	h.cfg.Logger.Warn("node heartbeat missed; marking down", "node_id", nodeID, "ttl", h.cfg.TTL)
	if err := h.cfg.MarkDown(node); err != nil {
		h.cfg.Logger.Error("failed to mark node down", "node_id", nodeID, "error", err)
	}
}

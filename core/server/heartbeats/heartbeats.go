// Package heartbeats is the leader's node heartbeat tracker.
//
// Every node that is not down has a timer of its TTL plus Grace, restarted
// by each of its heartbeats (Reset). A timer that lapses marks its node
// down (Config.MarkDown, which writes the status and the node-update
// evals). The Tracker is leader-owned: Run, started at step-up and stopped
// by ending its context, arms a timer of FailoverTTL for every live node
// (the new leader does not know when each node last heartbeated, and the
// nodes need a heartbeat interval to find it), and drops every timer when
// it returns; Reset is ignored while Run is not running.
//
// The TTL grows with the fleet so that the leader handles about
// MaxPerSecond heartbeats a second whatever the number of nodes: a node is
// given max(MinTTL, nodes/MaxPerSecond), plus a random stagger of up to as
// much again so that the nodes' heartbeats spread out (as Nomad's
// max_heartbeats_per_second, min_heartbeat_ttl).
package heartbeats

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// Timer is a started timer (*time.Timer is one).
type Timer interface{ Stop() bool }

// Defaults of the Config's knobs (Nomad's).
const (
	DefaultMinTTL       = 10 * time.Second
	DefaultMaxPerSecond = 50.0
	DefaultFailoverTTL  = 5 * time.Minute
)

// Config is what a Tracker needs.
type Config struct {
	// MinTTL is the floor of the heartbeat TTL clients honour (zero:
	// DefaultMinTTL); Grace is added to a node's TTL before it is marked
	// down.
	MinTTL, Grace time.Duration
	// MaxPerSecond is the heartbeat rate the TTL aims at (zero or less:
	// DefaultMaxPerSecond).
	MaxPerSecond float64
	// FailoverTTL is every live node's timer at step-up (zero:
	// DefaultFailoverTTL).
	FailoverTTL time.Duration
	// Stagger returns a random duration in [0, d) (nil: uniform); tests
	// fix it.
	Stagger func(d time.Duration) time.Duration
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
	timers  map[string]*timer
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
	if cfg.MinTTL <= 0 {
		cfg.MinTTL = DefaultMinTTL
	}
	if cfg.MaxPerSecond <= 0 {
		cfg.MaxPerSecond = DefaultMaxPerSecond
	}
	if cfg.FailoverTTL <= 0 {
		cfg.FailoverTTL = DefaultFailoverTTL
	}
	if cfg.Stagger == nil {
		cfg.Stagger = func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d)
		}
	}
	return &Tracker{cfg: cfg, timers: map[string]*timer{}, expired: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// ScaledTTL is the TTL that keeps n nodes at about perSecond heartbeats a
// second, never under min: max(min, n/perSecond seconds).
func ScaledTTL(min time.Duration, perSecond float64, n int) time.Duration {
	if perSecond <= 0 || n <= 0 {
		return min
	}
	return max(min, time.Duration(float64(n)/perSecond*float64(time.Second)))
}

// Reset restarts a node's timer (a heartbeat, a registration) and returns
// the TTL the node must honour: the fleet's scaled TTL plus a random
// stagger below it. The timer is that TTL plus Grace. While Run is not
// running no timer is armed, and the TTL is the one of the fleet known.
func (h *Tracker) Reset(nodeID string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.timers)
	if _, ok := h.timers[nodeID]; !ok {
		n++
	}
	ttl := ScaledTTL(h.cfg.MinTTL, h.cfg.MaxPerSecond, n)
	ttl += h.cfg.Stagger(ttl)
	if h.enabled {
		h.armLocked(nodeID, ttl+h.cfg.Grace)
	}
	return ttl
}

// timer is a node's armed timer; a lapse counts only while it is still
// the node's (a heartbeat may replace it as it fires).
type timer struct{ t Timer }

// armLocked (re)starts a node's timer at d. h.mu is held.
func (h *Tracker) armLocked(nodeID string, d time.Duration) {
	if old, ok := h.timers[nodeID]; ok {
		old.t.Stop()
	}
	delete(h.expired, nodeID)
	e := &timer{}
	h.timers[nodeID] = e
	e.t = h.cfg.AfterFunc(d, func() {
		h.mu.Lock()
		if h.timers[nodeID] != e {
			h.mu.Unlock()
			return
		}
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
		for id, e := range h.timers {
			e.t.Stop()
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

// armTimers starts a timer of FailoverTTL for every node that is not down
// and reports whether it could read them. A node whose heartbeat already
// reached this leader keeps the timer that heartbeat gave it.
func (h *Tracker) armTimers() bool {
	nodes, err := h.cfg.Nodes()
	if err != nil {
		h.cfg.Logger.Error("failed to read nodes to arm heartbeat timers; retrying", "error", err)
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range nodes {
		if _, ok := h.timers[n.ID]; !ok && n.Status != structs.NodeStatusDown && h.enabled {
			h.armLocked(n.ID, h.cfg.FailoverTTL)
		}
	}
	return true
}

// Nodes is the number of nodes with a timer.
func (h *Tracker) Nodes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.timers)
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
	h.cfg.Logger.Warn("node heartbeat missed; marking down", "node_id", nodeID)
	if err := h.cfg.MarkDown(node); err != nil {
		h.cfg.Logger.Error("failed to mark node down", "node_id", nodeID, "error", err)
	}
}

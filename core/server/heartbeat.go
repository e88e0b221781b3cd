package server

import (
	"context"
	"sync"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// heartbeater marks nodes down when their heartbeat TTL (plus grace)
// lapses. It runs on the leader; on step-up every live node gets a fresh
// timer, so a new leader never marks nodes down for the old leader's gap.
type heartbeater struct {
	s *Server

	mu      sync.Mutex
	enabled bool
	timers  map[string]*time.Timer
	expired map[string]bool
	wake    chan struct{}
}

func newHeartbeater(s *Server) *heartbeater {
	return &heartbeater{s: s, timers: map[string]*time.Timer{}, expired: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// reset restarts a node's timer.
func (h *heartbeater) reset(nodeID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.enabled {
		return
	}
	if t, ok := h.timers[nodeID]; ok {
		t.Stop()
	}
	h.timers[nodeID] = time.AfterFunc(h.s.cfg.HeartbeatTTL+h.s.cfg.HeartbeatGrace, func() {
		h.mu.Lock()
		h.expired[nodeID] = true
		h.mu.Unlock()
		select {
		case h.wake <- struct{}{}:
		default:
		}
	})
}

func (h *heartbeater) run(ctx context.Context) {
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
	retry := time.NewTicker(time.Second)
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
			h.mu.Lock()
			ids := make([]string, 0, len(h.expired))
			for id := range h.expired {
				ids = append(ids, id)
				delete(h.timers, id)
			}
			h.expired = map[string]bool{}
			h.mu.Unlock()
			for _, id := range ids {
				h.invalidate(id)
			}
		}
	}
}

// armTimers starts a heartbeat timer for every node that is not down and
// reports whether it could read them.
func (h *heartbeater) armTimers() bool {
	nodes, err := h.s.State().Nodes(nil)
	if err != nil {
		h.s.logger.Error("failed to read nodes to arm heartbeat timers; retrying", "error", err)
		return false
	}
	for _, n := range nodes {
		if n.Status != structs.NodeStatusDown {
			h.reset(n.ID)
		}
	}
	return true
}

func (h *heartbeater) invalidate(nodeID string) {
	node, err := h.s.State().NodeByID(nil, nodeID)
	if err != nil {
		// Arm the timer again so that the node is checked once more.
		h.s.logger.Error("failed to read node whose heartbeat expired", "node_id", nodeID, "error", err)
		h.reset(nodeID)
		return
	}
	if node == nil || node.Status == structs.NodeStatusDown {
		return
	}
	h.s.logger.Warn("node heartbeat missed; marking down", "node_id", nodeID, "ttl", h.s.cfg.HeartbeatTTL)
	if err := h.s.setNodeStatus(node, structs.NodeStatusDown, "Node heartbeat missed"); err != nil {
		h.s.logger.Error("failed to mark node down", "node_id", nodeID, "error", err)
	}
}

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
	drain := time.NewTicker(time.Second)
	defer drain.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-drain.C:
			if !armed {
				armed = h.armTimers()
			}
			h.s.runDrainer()
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

// runDrainer advances every active drain, as each alloc's job type declares:
// allocs that run to completion (sysbatch) are left to finish until the
// deadline; those that drain last (system) go after all others and stay
// when the drain ignores system jobs. A node with nothing left to migrate
// has its drain completed.
func (s *Server) runDrainer() {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	st := s.State()
	nodes, err := st.Nodes(nil)
	if err != nil {
		s.logger.Error("drainer failed to read nodes", "error", err)
		return
	}
	now := s.cfg.Now()
	forcedBefore := s.forcedDrains
	s.forcedDrains = map[string]time.Time{}
	for _, n := range nodes {
		ds := n.DrainStrategy
		if ds == nil {
			continue
		}
		forced := !ds.ForceDeadline.IsZero() && !now.Before(ds.ForceDeadline)
		// The first tick past the deadline evaluates the jobs of the
		// allocs already marked too: their scheduler paced them
		// (migrate.max_parallel, waiting for healthy replacements) and
		// learns from the node that they now leave at once.
		forcedNow := forced && !forcedBefore[n.ID].Equal(ds.ForceDeadline)
		if forced && !forcedNow {
			s.forcedDrains[n.ID] = ds.ForceDeadline
		}
		allocs, err := st.AllocsByNode(nil, n.ID)
		if err != nil {
			s.logger.Error("drainer failed to read the node's allocs", "node_id", n.ID, "error", err)
			continue
		}
		var live, last []*structs.Allocation
		for _, a := range allocs {
			if a.TerminalStatus() {
				continue
			}
			if allocBehavior(a).DrainLast {
				if !ds.IgnoreSystemJobs {
					last = append(last, a)
				}
				continue
			}
			live = append(live, a)
		}
		var migrate []*structs.Allocation
		for _, a := range live {
			finishes := allocBehavior(a).RunsToCompletion
			if (!finishes || forced) && (!a.DesiredTransition.ShouldMigrate() || forcedNow) {
				migrate = append(migrate, a)
			}
		}
		if len(live) == 0 || forced {
			for _, a := range last {
				if !a.DesiredTransition.ShouldMigrate() {
					migrate = append(migrate, a)
				}
			}
		}
		if len(live) == 0 && len(last) == 0 {
			_, err := s.raftApply(structs.NodeUpdateDrainRequestType, &structs.NodeUpdateDrainRequest{
				NodeID: n.ID, UpdatedAt: now.Unix(),
				NodeEvent: &structs.NodeEvent{Message: "Node drain complete", Subsystem: "Drain", Timestamp: now},
			})
			if err != nil {
				s.logger.Warn("failed to complete drain", "node_id", n.ID, "error", err)
			} else {
				s.logger.Info("node drain complete", "node_id", n.ID)
			}
			continue
		}
		if len(migrate) == 0 {
			if forcedNow {
				s.forcedDrains[n.ID] = ds.ForceDeadline
			}
			continue
		}
		req, err := s.drainMigration(n.ID, migrate)
		if err != nil {
			// Migrating without the jobs' evals would mark allocs that
			// nothing reschedules: the next tick tries again.
			s.logger.Error("drainer failed to read the jobs to migrate", "node_id", n.ID, "error", err)
			continue
		}
		if _, err := s.raftApply(structs.AllocUpdateDesiredTransitionRequestType, req); err != nil {
			s.logger.Warn("failed to migrate allocs for drain", "node_id", n.ID, "error", err)
			continue
		}
		if forcedNow {
			s.forcedDrains[n.ID] = ds.ForceDeadline
		}
	}
}

// drainMigration marks allocs for migration off a draining node, with one
// drain eval per job that acts on them.
func (s *Server) drainMigration(nodeID string, migrate []*structs.Allocation) (*structs.AllocUpdateDesiredTransitionRequest, error) {
	st := s.State()
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
			ev := s.newEval(j, structs.EvalTriggerNodeDrain)
			ev.JobModifyIndex, ev.NodeID = j.JobModifyIndex, nodeID
			req.Evals = append(req.Evals, ev)
		}
	}
	return req, nil
}

// allocBehavior is the declaration of the alloc's job type as its job
// version was registered with; the zero behaviour without one.
func allocBehavior(a *structs.Allocation) structs.JobTypeBehavior {
	if a.Job == nil || a.Job.TypeBehavior == nil {
		return structs.JobTypeBehavior{}
	}
	return *a.Job.TypeBehavior
}

package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/evalbroker"
	"github.com/drover-org/drover/core/structs"
)

// monitorLeadership enables the leader-only components when this server
// becomes leader and disables them when it stops leading.
func (s *Server) monitorLeadership() {
	defer s.wg.Done()
	ch := s.raft.LeaderCh()
	for {
		select {
		case <-s.shutdownCtx.Done():
			return
		case isLeader := <-ch:
			s.cfg.Metrics.LeaderChanged()
			if isLeader {
				s.stepUp(ch)
			} else {
				s.revokeLeadership()
			}
		}
	}
}

// Step-up retry defaults (see Config.StepUpAttempts and StepUpBackoff).
const (
	defaultStepUpAttempts = 3
	defaultStepUpBackoff  = time.Second
	maxStepUpBackoff      = 30 * time.Second
)

// stepUp establishes leadership, retrying a failed attempt with a doubling
// backoff. A leader that fails to establish itself still accepts writes but
// schedules nothing (its broker is disabled), so after StepUpAttempts
// failures in a row it hands leadership to another server. When there is
// none to take it (a single server), it keeps retrying at the backoff and
// tries the hand-over again after every StepUpAttempts failures. It returns
// once leadership is established, handed over or lost, or the server shuts
// down.
func (s *Server) stepUp(leaderCh <-chan bool) {
	wait := s.cfg.StepUpBackoff
	for attempt := 1; ; attempt++ {
		err := s.establishLeadership()
		if err == nil {
			return
		}
		// Undo what the attempt enabled, so that no half-enabled leader
		// hands out work.
		s.revokeLeadership()
		s.logger.Error("failed to establish leadership", "attempt", attempt, "error", err)
		if attempt%s.cfg.StepUpAttempts == 0 {
			err := s.raft.LeadershipTransfer().Error()
			if err == nil {
				s.logger.Warn("handed leadership to another server after failing to establish it", "attempts", attempt)
				return
			}
			s.logger.Error("failed to hand over leadership; retrying step-up", "error", err)
		}
		timer := time.NewTimer(wait)
		select {
		case <-s.shutdownCtx.Done():
			timer.Stop()
			return
		case isLeader := <-leaderCh:
			timer.Stop()
			if !isLeader {
				return
			}
		case <-timer.C:
		}
		if !s.IsLeader() {
			// The loss shows on leaderCh too; monitorLeadership revokes
			// (a no-op now) when it reads it.
			return
		}
		if wait *= 2; wait > maxStepUpBackoff {
			wait = maxStepUpBackoff
		}
	}
}

// establishLeadership runs on step-up: it waits for the FSM to apply every
// committed entry (a barrier), then rebuilds the in-memory queues from state.
// On an error the caller revokes what it enabled.
func (s *Server) establishLeadership() error {
	if err := s.raft.Barrier(time.Minute).Error(); err != nil {
		return fmt.Errorf("raft barrier: %w", err)
	}
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	if s.leaderCancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(s.shutdownCtx)
	s.leaderCancel = cancel

	s.planQueue.SetEnabled(true)
	s.broker.SetEnabled(true)
	s.blocked.SetEnabled(true)
	s.csi.SetEnabled(true)
	if f := s.cfg.stepUpFault; f != nil {
		if err := f(); err != nil {
			return err
		}
	}
	if err := s.applyBrokerPause(); err != nil {
		return fmt.Errorf("scheduler configuration: %w", err)
	}
	if err := (evalKeeper{s}).restore(); err != nil {
		return fmt.Errorf("restore evals: %w", err)
	}
	if err := s.periodic.Restore(); err != nil {
		return fmt.Errorf("restore periodic dispatcher: %w", err)
	}

	s.startLeaderLoop(ctx, func(ctx context.Context) { s.plans.Run(ctx, s.planQueue) }) // the single plan applier (§9.3)
	s.startLeaderLoop(ctx, evalKeeper{s}.reapFailed)
	s.startLeaderLoop(ctx, evalKeeper{s}.reapDuplicates)
	s.startLeaderLoop(ctx, s.periodic.Run)
	s.startLeaderLoop(ctx, s.heartbeat.run)
	s.startLeaderLoop(ctx, s.drainer.Run)
	s.startLeaderLoop(ctx, s.newDeploymentWatcher().Run)
	s.startLeaderLoop(ctx, s.runAutopilot)
	if s.cfg.GC != nil {
		// The GC engine owns one-time token expiry (one-time-token-gc)
		// along with every other collection.
		s.gc = collector{s}.newEngine()
		s.startLeaderLoop(ctx, s.gc.Run)
	} else if s.cfg.ACLEnabled {
		// Without a GC plugin, expired one-time tokens still go: they
		// are credentials, not history.
		s.startLeaderLoop(ctx, s.expireOneTimeTokens)
	}
	if s.cfg.ScheduledSnapshot != nil {
		s.startLeaderLoop(ctx, s.runScheduledSnapshots)
	}
	s.volumes.SetEnabled(true)
	s.established.Store(true)
	s.logger.Info("cluster leadership acquired")
	return nil
}

func (s *Server) startLeaderLoop(ctx context.Context, fn func(context.Context)) {
	s.leaderWG.Add(1)
	go func() {
		defer s.leaderWG.Done()
		fn(ctx)
	}()
}

// revokeLeadership stops every leader loop and flushes the queues.
func (s *Server) revokeLeadership() {
	s.leaderMu.Lock()
	cancel := s.leaderCancel
	s.leaderCancel = nil
	s.gc = nil
	s.leaderMu.Unlock()
	if cancel == nil {
		return
	}
	s.established.Store(false)
	cancel()
	s.volumes.SetEnabled(false)
	s.csi.SetEnabled(false)
	s.broker.SetEnabled(false)
	s.blocked.SetEnabled(false)
	s.planQueue.SetEnabled(false)
	s.leaderWG.Wait()
	// After the loops: periodic.Run disables it too when it ends, but a
	// failed step-up may have restored it without starting the loop.
	s.periodic.Disable()
	s.logger.Info("cluster leadership lost")
}

// evalKeeper is the leader's housekeeping of evals: restoring them at
// step-up, failing those at the delivery limit, cancelling duplicates.
type evalKeeper struct{ s *Server }

// restore re-enqueues every pending eval and re-blocks every blocked
// one, so nothing in flight under the previous leader is lost.
func (k evalKeeper) restore() error {
	s := k.s
	evals, err := s.State().Evals(nil)
	if err != nil {
		return err
	}
	for _, ev := range evals {
		switch ev.Status {
		case structs.EvalStatusPending:
			s.broker.Enqueue(ev)
		case structs.EvalStatusBlocked:
			s.blocked.Block(ev)
		}
	}
	return nil
}

// Defaults of the delay before an eval failed at the delivery limit is
// tried again (Config.FailedEvalFollowupBaseline, …Range).
const (
	DefaultFailedEvalFollowupBaseline = time.Minute
	DefaultFailedEvalFollowupRange    = 5 * time.Minute
)

// reapFailed marks evals that hit the broker's delivery limit failed
// and, in the same entry, creates each one's follow-up: an eval of the
// same job due after the baseline delay plus a random part of the range,
// so that a job whose scheduler plugin was down (or hung) for a while is
// placed once the plugin is back, and the evals failed together do not all
// come back at once. A follow-up that fails again gets its own.
func (k evalKeeper) reapFailed(ctx context.Context) {
	s := k.s
	for {
		ev, token, err := s.broker.Dequeue(ctx, []string{evalbroker.FailedQueue})
		if err != nil {
			return
		}
		follow := k.followup(ev)
		up := ev.Copy()
		up.Status = structs.EvalStatusFailed
		up.StatusDescription = k.deliveryLimitDescription(ev.ID)
		up.NextEval = follow.ID
		if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{up, follow}}); err != nil {
			s.logger.Error("failed to mark eval failed", "eval_id", ev.ID, "error", err)
			_ = s.broker.Nack(ev.ID, token)
			continue
		}
		s.logger.Warn("eval failed at the delivery limit; follow-up scheduled", "eval_id", ev.ID, "job_id", ev.JobID,
			"namespace", ev.Namespace, "followup_eval_id", follow.ID, "wait_until", follow.WaitUntil)
		_ = s.broker.Ack(ev.ID, token)
	}
}

// followup is the follow-up of ev, failed at the delivery limit.
func (k evalKeeper) followup(ev *structs.Evaluation) *structs.Evaluation {
	s := k.s
	now := s.cfg.Now()
	wait := s.cfg.FailedEvalFollowupBaseline
	if r := s.cfg.FailedEvalFollowupRange; r > 0 {
		wait += rand.N(r)
	}
	return &structs.Evaluation{
		ID: uuid.NewString(), Namespace: ev.Namespace, Priority: ev.Priority, Type: ev.Type,
		TriggeredBy: structs.EvalTriggerFailedFollowUp, JobID: ev.JobID, JobModifyIndex: ev.JobModifyIndex,
		NodeID: ev.NodeID, Status: structs.EvalStatusPending, WaitUntil: now.Add(wait).UTC(),
		StatusDescription: "created to retry an evaluation that reached the delivery limit",
		PreviousEval:      ev.ID, CreateTime: now.UnixNano(), ModifyTime: now.UnixNano(),
	}
}

// reapDuplicates cancels evals superseded by a newer eval of the same job.
func (k evalKeeper) reapDuplicates(ctx context.Context) {
	s := k.s
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		dups := append(s.broker.Cancelable(100), s.blocked.Duplicates(100)...)
		if len(dups) == 0 {
			continue
		}
		up := make([]*structs.Evaluation, 0, len(dups))
		for _, ev := range dups {
			c := ev.Copy()
			c.Status = structs.EvalStatusCancelled
			c.StatusDescription = "canceled after more recent eval was processed"
			up = append(up, c)
		}
		if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: up}); err != nil {
			s.logger.Warn("failed to cancel duplicate evals", "count", len(up), "error", err)
		}
	}
}

// leaderHooks feeds committed changes to the leader's in-memory components.
// Every hook is cheap and non-blocking, as the FSM requires; on followers
// the components are disabled and ignore the calls.
type leaderHooks struct{ s *Server }

func (h *leaderHooks) EvalsCommitted(evals []*structs.Evaluation) {
	s := h.s
	if !s.broker.Enabled() {
		return
	}
	for _, ev := range evals {
		switch {
		case ev.Status == structs.EvalStatusPending:
			s.broker.Enqueue(ev)
		case ev.Status == structs.EvalStatusBlocked:
			s.blocked.Block(ev)
		case ev.Status == structs.EvalStatusComplete && len(ev.FailedTGAllocs) == 0:
			s.blocked.Untrack(ev.Namespace, ev.JobID)
		}
	}
}

func (h *leaderHooks) AllocsClientUpdated(allocs []*structs.Allocation, index uint64) {
	s := h.s
	if !s.broker.Enabled() {
		return
	}
	seen := map[string]bool{}
	for _, a := range allocs {
		if !a.ClientTerminalStatus() || seen[a.NodeID] {
			continue
		}
		seen[a.NodeID] = true
		s.blocked.UnblockNode(a.NodeID, index)
		n, err := s.State().NodeByID(nil, a.NodeID)
		if err != nil {
			// A hook cannot fail the entry; the node-ID unblock above
			// still frees the evals waiting on this very node.
			s.logger.Error("failed to read node to unblock its class", "node_id", a.NodeID, "error", err)
			continue
		}
		if n != nil {
			s.blocked.Unblock(n.ComputedClass, index)
		}
	}
}

func (h *leaderHooks) NodeChanged(node *structs.Node, index uint64) {
	s := h.s
	if !s.broker.Enabled() || node == nil {
		return
	}
	if node.Ready() {
		s.blocked.UnblockNode(node.ID, index)
		s.blocked.Unblock(node.ComputedClass, index)
	}
}

func (h *leaderHooks) JobUpserted(job *structs.Job) { h.s.periodic.JobChanged(job) }

func (h *leaderHooks) JobDeleted(ns, id string) { h.s.periodic.JobRemoved(ns, id) }

// VolumesFreed releases every blocked eval: which of them wait on a
// volume is not recorded (a volume check is per node, not per class), and
// freed claims are rare next to node and alloc changes. An eval that still
// does not fit blocks again.
func (h *leaderHooks) VolumesFreed(index uint64) {
	if h.s.broker.Enabled() {
		h.s.blocked.UnblockAll(index)
	}
}

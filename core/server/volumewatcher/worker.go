package volumewatcher

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// worker releases the past claims of one volume. It is owned by its
// period: the period's cancel stops it and its wg waits for it.
type worker struct {
	w       *Watcher
	p       *period
	key     volKey
	notifyC chan struct{} // 1 slot; sent to only under Watcher.mu
	limiter *limiter
	logger  hclog.Logger

	// Guarded by Watcher.mu: the volume's ModifyIndex last notified, and
	// whether the loop has told the worker its volume is gone.
	seen     uint64
	goneSeen bool
}

// poke notifies the worker without blocking; a notification already
// pending covers this one. The caller holds Watcher.mu.
func (wk *worker) poke() {
	select {
	case wk.notifyC <- struct{}{}:
	default:
	}
}

// tryExit removes the worker from its period unless a notification is
// pending (one sent after the worker's last read, which it must act on).
// Both run under Watcher.mu, so no notification is lost to an exiting
// worker: the loop starts a new one for the next write.
func (wk *worker) tryExit() bool {
	wk.w.mu.Lock()
	defer wk.w.mu.Unlock()
	if len(wk.notifyC) > 0 {
		return false
	}
	wk.remove()
	return true
}

// remove drops the worker from its period's map. The caller holds
// Watcher.mu.
func (wk *worker) remove() {
	if wk.p.workers[wk.key] == wk {
		delete(wk.p.workers, wk.key)
	}
}

// outcome is what one pass over the volume found.
type outcome int

const (
	outcomeOK      outcome = iota // nothing failed
	outcomeFailed                 // a read or a release failed: retry
	outcomeDone                   // the volume is gone or holds no claims
	outcomeWaiting                // a release waits for a write to the volume
)

func (wk *worker) run() {
	defer wk.p.wg.Done()
	defer func() {
		wk.w.mu.Lock()
		wk.remove()
		wk.w.mu.Unlock()
	}()
	cfg := &wk.w.cfg
	ctx := wk.p.ctx

	idle := time.NewTimer(cfg.Idle)
	defer idle.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var (
		retryC  <-chan time.Time // non-nil while a retry is pending
		waiting bool             // the pending retry is the safety net of a wait
		backoff = cfg.Backoff
	)

	for {
		var release bool
		select {
		case <-ctx.Done():
			return
		case <-wk.notifyC:
			// During a backoff a notification only checks whether
			// there is still anything to do; the release waits for
			// the retry, so that failures stay spaced out. A wait
			// ends with the write it waited for.
			release = retryC == nil || waiting
		case <-retryC:
			retryC, waiting = nil, false
			release = true
		case <-idle.C:
			if retryC == nil && wk.tryExit() {
				return
			}
			idle.Reset(cfg.Idle)
			continue
		}
		if release {
			if err := wk.limiter.wait(ctx); err != nil {
				return
			}
		}
		// The read below covers any notification sent until now.
		select {
		case <-wk.notifyC:
		default:
		}

		out := wk.pass(ctx, release)
		wk.w.passes.Add(1)
		if ctx.Err() != nil {
			return
		}
		switch {
		case out == outcomeDone:
			if wk.tryExit() {
				return
			}
		case out == outcomeFailed && release:
			retry.Reset(backoff)
			retryC, waiting = retry.C, false
			backoff = min(2*backoff, cfg.MaxBackoff)
		case out == outcomeWaiting && release:
			retry.Reset(cfg.MaxBackoff)
			retryC, waiting = retry.C, true
			backoff = cfg.Backoff
		case out == outcomeOK && release:
			retry.Stop()
			retryC, waiting = nil, false
			backoff = cfg.Backoff
		}
		idle.Reset(cfg.Idle)
	}
}

// pass reads the volume and, with release, hands its past claims to the
// unpublisher, in allocation ID order, in one call.
func (wk *worker) pass(ctx context.Context, release bool) outcome {
	store := wk.w.cfg.State()
	if store == nil {
		return outcomeFailed
	}
	v, err := store.CSIVolumeRaw(nil, wk.key.ns, wk.key.id)
	if err != nil {
		wk.logger.Warn("failed to read volume", "error", err)
		return outcomeFailed
	}
	if v == nil || !v.InUse() {
		return outcomeDone
	}
	if !release {
		return outcomeOK
	}
	out := outcomeOK
	vol := v.Copy()
	vol.ReleaseTerminal(func(allocID string) (bool, bool) {
		a, err := store.AllocByID(nil, allocID)
		if err != nil {
			// Unknown: keep the claim, and look again later.
			wk.logger.Warn("failed to read allocation of claim", "alloc_id", allocID, "error", err)
			out = outcomeFailed
			return true, false
		}
		if a == nil {
			return false, false
		}
		return true, a.ClientTerminalStatus()
	})
	ids := vol.PastClaimIDs()
	if len(ids) == 0 {
		return out
	}
	claims := make([]*structs.CSIVolumeClaim, len(ids))
	for i, allocID := range ids {
		claims[i] = vol.PastClaims[allocID].Copy()
	}
	errs := wk.w.cfg.Unpublisher.UnpublishClaims(ctx, wk.key.ns, wk.key.id, claims)
	if ctx.Err() != nil {
		return out
	}
	for i, claim := range claims {
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrWaiting):
			wk.logger.Debug("volume claim release waits", "alloc_id", claim.AllocationID, "node_id", claim.NodeID, "reason", err)
			if out == outcomeOK {
				out = outcomeWaiting
			}
		default:
			wk.logger.Warn("failed to release volume claim",
				"alloc_id", claim.AllocationID, "node_id", claim.NodeID, "claim_state", claim.State.String(), "error", err)
			out = outcomeFailed
		}
	}
	return out
}

// limiter is a token bucket: rate tokens a second, at most burst saved.
// It is used by one goroutine only.
type limiter struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// wait takes a token, waiting for one if none is saved, or returns ctx's
// error when ctx ends first.
func (l *limiter) wait(ctx context.Context) error {
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	l.tokens--
	if l.tokens >= 0 {
		return nil
	}
	d := time.Duration(-l.tokens / l.rate * float64(time.Second))
	if !sleep(ctx, d) {
		l.tokens++ // not taken
		return ctx.Err()
	}
	return nil
}

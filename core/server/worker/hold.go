package worker

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/scheduler"
)

// An eval whose job type no scheduler plugin serves right now is held, not
// failed: the plugin set of an agent is live (a reload adds and removes
// plugins), so the plugin may be on its way back, or another may declare
// the type. Registering a job of a type no plugin serves is still refused
// (Job.Register), so such an eval comes from a job registered while its
// type was served.
//
// Holding is handing the eval back to the broker without spending a
// delivery, after a delay that doubles from the broker's first nack delay
// up to Config.MaxHoldDelay: an eval whose type comes back is scheduled at
// most that long after, and one whose type never comes back waits, costing
// a dequeue every MaxHoldDelay, logged once at warning level and counted
// (Metrics.EvalHeld), its reason kept for the eval's last word.

// DefaultMaxHoldDelay is Config.MaxHoldDelay's default.
const DefaultMaxHoldDelay = 5 * time.Second

// notServed is what schedule returns for an eval whose job type no plugin
// serves right now.
type notServed struct{ desc string }

func (n *notServed) Error() string { return n.desc }

func (w *worker) notServed(ev *structs.Evaluation) *notServed {
	served := w.p.cfg.Schedulers.ServedTypes()
	list := "none"
	if len(served) > 0 {
		list = strings.Join(served, ", ")
	}
	return &notServed{desc: fmt.Sprintf("no scheduler plugin serves job type %q (served: %s); "+
		"the eval waits for a plugin that declares it", ev.Type, list)}
}

// rerouted tells, after a plugin call failed with err (of kind
// structs.ErrUnavailable), whether the job type left the plugin the call
// went to: a reload removed that plugin, and either another plugin serves
// the type now (retry at once, without spending a delivery: the eval was
// never the problem) or none does (hold the eval). nil: the type is still
// the same plugin's, which is down or died during the call.
func (w *worker) rerouted(ev *structs.Evaluation, called scheduler.Scheduler, err error) error {
	now, _, lerr := w.p.cfg.Schedulers.Lookup(ev.Type)
	switch {
	case lerr == nil && schedulerPluginName(now) != schedulerPluginName(called):
		return &retryLater{err: fmt.Errorf("job type %q moved to plugin %q during the call: %w", ev.Type, schedulerPluginName(now), err)}
	case lerr != nil && !errors.Is(lerr, structs.ErrUnavailable):
		return w.notServed(ev)
	}
	return nil
}

// hold hands an eval of an unserved type back to the broker without
// spending a delivery, after holdDelay.
func (w *worker) hold(ev *structs.Evaluation, token string, why *notServed, log hclog.Logger) {
	n := w.p.held.add(ev.ID)
	delay := w.holdDelay(n)
	w.p.reasons.set(ev.ID, why.Error())
	if h, ok := w.p.cfg.Metrics.(interface{ EvalHeld(jobType string) }); ok {
		h.EvalHeld(ev.Type)
	}
	if n == 1 {
		log.Warn("no scheduler plugin serves the eval's job type; holding the eval until one does", "reason", why.Error(),
			"retry_in", delay)
	} else {
		log.Debug("eval still held: its job type is not served", "times_held", n, "retry_in", delay)
	}
	if rerr := w.p.cfg.Broker.Requeue(ev.ID, token, delay); rerr != nil {
		log.Debug("requeue failed", "error", rerr)
	}
}

// holdDelay is the delay before the n-th (from 1) retry of a held eval.
func (w *worker) holdDelay(n int) time.Duration {
	d, limit := w.unavailableRetryDelay(), w.p.cfg.MaxHoldDelay
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// holdLog counts how many times each eval was held in a row.
type holdLog struct {
	mu sync.Mutex
	m  map[string]int
}

func (h *holdLog) add(evalID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxReasons {
		h.m = map[string]int{}
	}
	h.m[evalID]++
	return h.m[evalID]
}

func (h *holdLog) take(evalID string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.m[evalID]
	delete(h.m, evalID)
	return n
}

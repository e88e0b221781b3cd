package worker

import "sync"

// typeGate keeps one misbehaving scheduler plugin from taking every worker.
//
// Each plugin call is bounded by Config.CallTimeout, so a hung plugin
// costs a worker at most that long per eval. That alone is not enough:
// with a backlog of evals of the hung type, every worker would pick one,
// wait out the timeout, nack it and pick the next, and evals of other types
// would wait behind them indefinitely (nacked evals keep their place in
// line). So a type whose last call timed out or found its plugin
// unavailable is degraded: at most one worker holds an eval of it at a
// time, which probes the plugin, while the others serve the other types.
// The first call of the type that returns in time lifts the limit.
//
// The limit applies only to degraded types, so a healthy type keeps every
// worker; a fixed per-type share would cost a single-type cluster
// throughput for a failure it does not have.
type typeGate struct {
	mu       sync.Mutex
	inflight map[string]int
	degraded map[string]bool
}

func newTypeGate() *typeGate {
	return &typeGate{inflight: map[string]int{}, degraded: map[string]bool{}}
}

// admits reports whether a worker may take an eval of t now. The broker
// calls it under its lock; it takes only the gate's own lock.
func (g *typeGate) admits(t string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.degraded[t] || g.inflight[t] == 0
}

// enter claims a slot of t for a dequeued eval. It fails when another
// worker claimed the last slot between the broker's admits and now; the
// caller hands the eval back.
func (g *typeGate) enter(t string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.degraded[t] && g.inflight[t] > 0 {
		return false
	}
	g.inflight[t]++
	return true
}

// leave releases a slot taken by enter.
func (g *typeGate) leave(t string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight[t]--; g.inflight[t] <= 0 {
		delete(g.inflight, t)
	}
}

// setDegraded records whether t's last plugin call failed to complete in
// time. It reports whether that changed.
func (g *typeGate) setDegraded(t string, on bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.degraded[t] == on {
		return false
	}
	if on {
		g.degraded[t] = true
	} else {
		delete(g.degraded, t)
	}
	return true
}

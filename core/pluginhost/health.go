package pluginhost

import (
	"fmt"
	"time"
)

// A plugin whose process runs may still not answer: stopped (SIGSTOP), or
// wedged in a call. Its status says so within seconds, in two ways:
//
//   - a call the host knows should be quick (a scheduler's Schedule) that
//     has been outstanding longer than UnansweredAfter;
//   - the owner's periodic probe of go-plugin's health service, which an
//     idle plugin answers in well under a millisecond: probeMisses probes
//     in a row without an answer within probeTimeout.
//
// Either makes Health structs.AgentPluginUnhealthy with a reason; the next
// answer clears it. Nothing is restarted for it: a slow plugin that answers
// in the end loses no work.

// Defaults of Config.UnansweredAfter and Config.ProbeInterval.
const (
	DefaultUnansweredAfter = 5 * time.Second
	DefaultProbeInterval   = 3 * time.Second
)

const (
	// probeTimeout bounds one health probe.
	probeTimeout = 2 * time.Second
	// probeMisses is how many probes in a row must go unanswered before
	// the plugin is reported unhealthy (one slow probe on a loaded machine
	// is not a hang).
	probeMisses = 2
)

type inflightCall struct {
	what  string
	start time.Time
}

// trackCall records a call that should be quick until the returned func
// is called.
func (m *managed) trackCall(what string) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inflight == nil {
		m.inflight = map[uint64]inflightCall{}
	}
	m.callSeq++
	id := m.callSeq
	m.inflight[id] = inflightCall{what: what, start: time.Now()}
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.inflight, id)
	}
}

// unhealthyLocked is why a running plugin is unhealthy, "" if it is not.
// m.mu is held.
func (m *managed) unhealthyLocked(now time.Time) string {
	var oldest inflightCall
	for _, c := range m.inflight {
		if oldest.start.IsZero() || c.start.Before(oldest.start) {
			oldest = c
		}
	}
	if !oldest.start.IsZero() {
		if d := now.Sub(oldest.start); d >= m.h.unansweredAfter {
			return fmt.Sprintf("a %s call has not been answered for %s", oldest.what, d.Round(time.Second))
		}
	}
	if m.probeMissed >= probeMisses {
		return fmt.Sprintf("did not answer its health check within %s, %d times in a row", probeTimeout, m.probeMissed)
	}
	return ""
}

// probe asks inst's health service once and records the answer. It runs
// on the owner goroutine.
func (m *managed) probe(inst *instance) {
	ok := inst.healthyWithin(m.h.ctx, probeTimeout)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != inst {
		return
	}
	was := m.probeMissed >= probeMisses
	if ok {
		m.probeMissed = 0
		if was {
			m.log.Info("plugin answers its health check again", "pid", inst.pid)
		}
		return
	}
	m.probeMissed++
	if !was && m.probeMissed >= probeMisses {
		m.log.Warn("plugin does not answer its health check; reporting it unhealthy", "pid", inst.pid, "misses", m.probeMissed)
	}
}

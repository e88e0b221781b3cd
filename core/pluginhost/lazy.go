package pluginhost

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// Lazy plugins (Builtin.Lazy) are idle until first needed. An idle plugin
// has an owner goroutine like any other, waiting for one of: a start
// request (startc, sent by the first call that needs it, or Host.Start), a
// reload that brings it a config block (launched to check it), removal, or
// Close. Its declaration comes from Builtin.Declare, so it is routed while
// idle. The first instance is made current exactly as a restarted one
// (setCurrent), and from then on the plugin is supervised as any other.

// InProcess is what a built-in plugin's code answers in the agent's
// process, without a plugin process, so that a lazy plugin is known (and
// a driver fingerprinted) before it is started.
type InProcess struct {
	// Declare makes the declaration: what the plugin's kind's Init returns
	// when its process launches (a scheduler's Info, …). See
	// Builtin.Declare.
	Declare func(ctx context.Context) (any, error)
	// Fingerprint (a driver; nil for the others) fingerprints the driver
	// as its process would with the environment env (Builtin.Env, which
	// carries its config). It must be cheap and leave nothing running.
	Fingerprint func(ctx context.Context, env []string) (*driverpb.FingerprintResponse, error)
}

// inProcess is what RegisterInProcess recorded, by plugin name.
var inProcess = struct {
	sync.Mutex
	m map[string]InProcess
}{m: map[string]InProcess{}}

// RegisterInProcess records the in-process side of built-in plugin name.
// The binary that links the built-in plugins (plugins/builtin) registers
// them; the agent hands them to the host (Builtin.Declare,
// Builtin.Fingerprint).
func RegisterInProcess(name string, p InProcess) {
	inProcess.Lock()
	defer inProcess.Unlock()
	inProcess.m[name] = p
}

// BuiltinInProcess returns what RegisterInProcess recorded for name; its
// fields are nil if nothing was.
func BuiltinInProcess(name string) InProcess {
	inProcess.Lock()
	defer inProcess.Unlock()
	return inProcess.m[name]
}

// declare makes a lazy plugin's declaration in process, checked against its
// kind's type.
func (h *Host) declare(ctx context.Context, m *managed) (any, error) {
	decl, err := m.declare(ctx)
	if err != nil {
		return nil, err
	}
	if err := h.kinds[m.kind].declared(decl); err != nil {
		return nil, err
	}
	return decl, nil
}

// idleWait is the owner goroutine of an idle plugin: it returns the first
// instance once one is launched, nil when the plugin is still idle (its
// start failed, or a request left it idle), and false when the owner must
// return (Close, removal).
func (m *managed) idleWait(backoff *time.Duration) (*instance, bool) {
	select {
	case <-m.h.ctx.Done():
		return nil, false
	case <-m.live.removec:
		m.removeNow(nil)
		return nil, false
	case req := <-m.reloadc:
		if req.stanza == nil {
			// Nothing runs to be replaced: the next start launches the
			// binary on disk then, as a reload would.
			req.reply <- nil
			return nil, true
		}
		// A new stanza for an idle plugin (ReloadChanged sends one only
		// when it differs): launch it to check the config now, as at
		// start, rather than at the first need.
		return m.reloadDown(req), true
	case <-m.startc:
	}
	m.mu.Lock()
	early := time.Now().Before(m.retryAt)
	if !early {
		m.starting = true
	}
	m.mu.Unlock()
	if early {
		return nil, true // a request left over from before a failed start
	}
	start := time.Now()
	inst, err := m.launch(m.h.ctx)
	if err != nil {
		*backoff = m.h.backoff.next(*backoff)
		m.mu.Lock()
		m.starting = false
		m.startTries++
		m.failedLaunches++
		m.lastErr = err
		m.retryAt = time.Now().Add(*backoff)
		m.wakeLocked()
		m.mu.Unlock()
		if m.h.ctx.Err() == nil {
			m.log.Error("plugin start failed; the call that needed it fails, the next need tries again",
				"error", err, "not_before", *backoff)
		}
		return nil, true
	}
	m.mu.Lock()
	m.starting = false
	m.startTries++
	m.setCurrentLocked(inst)
	m.mu.Unlock()
	m.h.rebuildRoutes()
	m.log.Info("plugin started on first need", "pid", inst.pid, "took", time.Since(start).Round(time.Millisecond))
	return inst, true
}

// awaitStart is acquire's part for an idle plugin: it asks the owner to
// start it (once per caller) and reports whether the caller should wait
// for a change (true) or fail with err. m.mu is held. tries is the
// caller's state: -1 until it asked.
func (m *managed) awaitStartLocked(tries *int) error {
	if *tries < 0 {
		if wait := time.Until(m.retryAt); wait > 0 {
			return unavailable(m.name, fmt.Errorf("its start failed (tried again in %s): %w",
				wait.Round(time.Millisecond), downErr(m.lastErr)))
		}
		*tries = m.startTries
		select {
		case m.startc <- struct{}{}:
		default: // a start is already asked for
		}
		return nil
	}
	if m.startTries > *tries && !m.starting {
		// The start asked for (or one after it) failed.
		return unavailable(m.name, fmt.Errorf("start on first need failed: %w", m.lastErr))
	}
	return nil
}

// Start launches plugin name if it is idle and waits until it runs, or
// until its start fails (ErrPluginUnavailable, with why). A plugin that
// already runs returns at once; one that is down (restarting) is waited for
// as a call would.
func (h *Host) Start(ctx context.Context, name string) error {
	if h.ctx.Err() != nil {
		return ErrClosed
	}
	m, ok := h.plugin(name)
	if !ok {
		return h.unknown(name)
	}
	inst, _, err := m.acquire(ctx, "")
	if err != nil {
		return err
	}
	inst.refs.Done()
	return nil
}

// StartInBackground asks idle plugin name to start without waiting for
// it: the agent starts the plugins a node needs at once this way, beside
// its own start. Its failure is the plugin's status (and log), and the
// next need tries again. Unknown names and running plugins are ignored.
func (h *Host) StartInBackground(name string) {
	m, ok := h.plugin(name)
	if !ok {
		return
	}
	m.mu.Lock()
	idle := m.idle
	m.mu.Unlock()
	if idle {
		select {
		case m.startc <- struct{}{}:
		default:
		}
	}
}

// Idle reports whether plugin name is idle: a lazy plugin not started yet
// (or whose start failed).
func (h *Host) Idle(name string) bool {
	m, ok := h.plugin(name)
	if !ok {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.idle
}

// available reports whether a call to the plugin may be made now: it runs,
// or it is idle and may be started (no failed start awaiting its retry).
func (m *managed) available() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != nil && !m.cur.down() {
		return true
	}
	return m.idle && !time.Now().Before(m.retryAt)
}

// idleStatusLocked fills the status of an idle plugin. m.mu is held.
func (m *managed) idleStatusLocked(st *PluginStatus) {
	st.Idle = true
	switch {
	case m.starting:
		st.Health, st.HealthDescription = structs.AgentPluginStarting, "starting on first need"
	case m.failedLaunches > 0:
		st.Health = structs.AgentPluginFailed
		st.HealthDescription = "its start on first need failed; the next need tries again"
	default:
		st.Health, st.HealthDescription = structs.AgentPluginIdle, "not started: starts when first needed"
	}
}

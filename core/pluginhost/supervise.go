package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/shared"
)

// instance is one running plugin process.
type instance struct {
	client  *plugin.Client
	proc    *os.Process
	pid     int
	started time.Time
	done    <-chan struct{} // closed when the process has exited
	conn    *grpc.ClientConn
	kinds   map[string]any // kind → dispensed interface
	infos   map[string]any // kind → what KindSpec.Init returned
	// config is the schema the instance published and the config it
	// accepted (baseconfig.go); a reload compares a new block with it.
	config pluginConfig
	// bin is the plugin binary as it was on disk when this instance was
	// launched; a reload of changed plugins compares it with the file now.
	bin os.FileInfo

	// replaced is cancelled once the instance is no longer current (a
	// reload swapped it out, or it is being taken down): long-lived calls
	// (Host.Watch) end then instead of holding up the drain.
	replaced       context.Context
	cancelReplaced context.CancelFunc

	// broken is closed when a call found the connection dead while the
	// process still looked alive (its exit not yet reaped, or wedged). The
	// instance then counts as down, and its owner replaces it.
	broken    chan struct{}
	breakOnce sync.Once

	// refs counts calls in flight. Add happens only under managed.mu while
	// the instance is current, so once it is swapped out no Add can race
	// the Wait of a drain.
	refs sync.WaitGroup
}

// down reports whether the instance can no longer serve calls.
func (i *instance) down() bool {
	select {
	case <-i.done:
		return true
	case <-i.broken:
		return true
	default:
		return false
	}
}

// kill ends an instance that may be wedged. go-plugin's Kill first asks the
// plugin to shut down over gRPC and waits without a deadline, so a process
// that stopped answering is sent SIGKILL first. Kill then frees go-plugin's
// goroutines and connection.
func (i *instance) kill() {
	i.cancelReplaced()
	killGroup(i.proc.Pid)
	_ = i.proc.Kill() // a no-op error if it already exited
	i.client.Kill()
}

func (i *instance) markBroken() { i.breakOnce.Do(func() { close(i.broken) }) }

// healthy asks go-plugin's health service over the instance's connection.
// It tells a plugin that answered Unavailable itself from a connection that
// died with the process.
func (i *instance) healthy(ctx context.Context) bool { return i.healthyWithin(ctx, healthTimeout) }

// healthyWithin is healthy with its own bound.
func (i *instance) healthyWithin(ctx context.Context, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := grpc_health_v1.NewHealthClient(i.conn).Check(ctx,
		&grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
	return err == nil
}

// healthTimeout bounds the health check after a failed call; a live plugin
// answers it in well under a millisecond.
const healthTimeout = time.Second

// managed is one configured plugin: how to launch it, and the state its owner
// goroutine (run) keeps. Only the owner launches, swaps and kills instances;
// callers only read cur under mu.
type managed struct {
	h       *Host
	log     hclog.Logger
	name    string
	builtin bool
	kind    string // a built-in's declared kind; "" for a third-party plugin
	path    string
	args    []string
	env     []string
	// config is the body of the stanza's config block (nil: none),
	// decoded and handed to the plugin at every launch.
	config  hcl.Body
	reloadc chan reloadReq

	// optional marks a plugin_dir file that no stanza names: one that fails
	// its first launch is skipped with a warning instead of failing New.
	optional bool
	// live is how a reload removes the plugin (live.go).
	live liveState
	// lazy: the plugin started idle (Builtin.Lazy, lazy.go); declare and
	// idleFingerprint are its Builtin's Declare and Fingerprint. startc
	// (buffered) asks its owner to start it.
	lazy            bool
	declare         func(context.Context) (any, error)
	idleFingerprint func(context.Context) *driverpb.FingerprintResponse
	startc          chan struct{}

	mu       sync.Mutex
	cur      *instance     // nil while down
	changed  chan struct{} // closed and replaced whenever cur changes
	infos    map[string]any
	restarts int
	lastErr  error
	// failedLaunches counts launches that failed since the last one that
	// succeeded; while it is not zero the plugin's health is "failed".
	failedLaunches int
	// inflight are the quick calls outstanding (health.go); probeMissed
	// counts the current instance's unanswered health probes in a row.
	inflight    map[uint64]inflightCall
	callSeq     uint64
	probeMissed int
	// idle: a lazy plugin no instance of which has been current yet;
	// starting while its owner launches it. startTries counts the lazy
	// launches that ended; after a failed one, retryAt is the earliest
	// time the next need may try again.
	idle       bool
	starting   bool
	startTries int
	retryAt    time.Time
}

type reloadReq struct {
	ctx context.Context
	// stanza, when set, replaces the plugin's config and args for this and
	// every later launch, but only if the launch succeeds.
	stanza *Stanza
	reply  chan error // buffered: the owner never blocks on it
}

// exitKind is a host-only pseudo kind. go-plugin hands every GRPCClient the
// context it cancels when the plugin process exits, but does not export it;
// dispensing this kind returns that context (and the connection, for health
// checks), which is how the owner notices a crash without polling. Nothing
// reaches the plugin process.
const exitKind = "drover-host-exit-watch"

type exitWatchClient struct {
	exited context.Context
	conn   *grpc.ClientConn
}

type exitWatch struct{ plugin.NetRPCUnsupportedPlugin }

func (exitWatch) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("pluginhost: the exit watch is host-only")
}

func (exitWatch) GRPCClient(ctx context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return exitWatchClient{exited: ctx, conn: conn}, nil
}

// launch starts a new process and readies it: handshake, its config
// (baseconfig.go), then KindSpec.Init of every kind it serves. On error
// nothing is left running.
func (m *managed) launch(ctx context.Context) (*instance, error) {
	return m.launchWith(ctx, m.args, m.config, m.h.startTimeout)
}

// launchWith is launch with the given args and config (a reload's new
// stanza, not yet adopted), its handshake bounded by timeout.
func (m *managed) launchWith(ctx context.Context, args []string, config hcl.Body, timeout time.Duration) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(m.h.ctx, cancel)() // Close aborts a launch too

	// Stat before exec: a binary replaced after this is seen as changed.
	bin, err := os.Stat(m.path)
	if err != nil {
		return nil, fmt.Errorf("launch plugin %q: %w", m.name, err)
	}
	cmd := exec.Command(m.path, args...)
	// Built after os.Environ so a plugin's own Env wins on duplicates.
	cmd.Env = append(os.Environ(), m.env...)
	dieWithHost(cmd)
	plugins := plugin.PluginSet{exitKind: exitWatch{}}
	for k, spec := range m.h.kinds {
		plugins[k] = spec.plugin
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  shared.Handshake,
		Plugins:          plugins,
		Cmd:              cmd,
		SkipHostEnv:      true,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		GRPCDialOptions:  shared.DialOptions(),
		Logger:           m.log,
		Managed:          false, // the owner kills it; plugin.CleanupClients is not used
		StartTimeout:     timeout,
	})
	inst, err := m.ready(ctx, client, cmd, config)
	if err != nil {
		if client.ReattachConfig() != nil && !client.Exited() {
			// It completed its handshake, so it answers: let it stop
			// itself first, which removes its socket file (a launch the
			// host's Close cut short after the handshake, a refused
			// config). go-plugin kills it if it does not exit soon.
			client.Kill()
		}
		if cmd.Process != nil {
			// Not graceful: it failed its launch, and a child it started
			// must not outlive it (see dieWithHost).
			killGroup(cmd.Process.Pid)
		}
		client.Kill()
		if isConfigRefusal(err) {
			// Its lines already name the plugin and start with the
			// position in the config file, which is what the user acts on.
			return nil, err
		}
		return nil, fmt.Errorf("launch plugin %q (%s): %w", m.name, m.path, err)
	}
	inst.bin = bin
	m.log.Debug("plugin started", "pid", inst.pid, "kinds", slices.Sorted(maps.Keys(inst.kinds)))
	return inst, nil
}

func (m *managed) ready(ctx context.Context, client *plugin.Client, cmd *exec.Cmd, config hcl.Body) (*instance, error) {
	rpc, err := client.Client()
	if err != nil {
		return nil, err
	}
	raw, err := rpc.Dispense(exitKind)
	if err != nil {
		return nil, err
	}
	watch := raw.(exitWatchClient)
	// The process's pid as go-plugin knows it (the same as cmd's, which
	// is the fallback should a future go-plugin not report it).
	pid := cmd.Process.Pid
	if rc := client.ReattachConfig(); rc != nil && rc.Pid > 0 {
		pid = rc.Pid
	}
	inst := &instance{
		client:  client,
		proc:    cmd.Process,
		pid:     pid,
		started: time.Now(),
		done:    watch.exited.Done(),
		conn:    watch.conn,
		kinds:   map[string]any{},
		infos:   map[string]any{},
		broken:  make(chan struct{}),
	}
	// The config comes first: a kind's Init (a scheduler's Info) may
	// depend on it, and no call may reach an unconfigured plugin.
	if inst.config, err = configure(ctx, watch.conn, m.name, config); err != nil {
		return nil, err
	}
	// The size only: a config may hold secrets.
	m.log.Debug("plugin config set", "pid", pid, "base_service", inst.config.served,
		"config_block", config != nil, "config_bytes", len(inst.config.json))
	candidates := []string{m.kind}
	if !m.builtin {
		candidates = slices.Sorted(maps.Keys(m.h.kinds))
	}
	for _, kind := range candidates {
		spec := m.h.kinds[kind]
		if !spec.discover && !m.builtin {
			continue
		}
		raw, err := rpc.Dispense(kind)
		if err != nil {
			return nil, fmt.Errorf("dispense %s: %w", kind, err)
		}
		// init admits only the kind's client type, so the typed views
		// (Clients) get what they expect.
		info, err := spec.init(ctx, raw)
		if !m.builtin && status.Code(err) == codes.Unimplemented {
			continue // discovery: the plugin does not serve this kind
		}
		if err != nil {
			return nil, fmt.Errorf("init %s: %w", kind, err)
		}
		inst.kinds[kind], inst.infos[kind] = raw, info
	}
	if len(inst.kinds) == 0 {
		return nil, fmt.Errorf("serves none of the plugin kinds %v", candidates)
	}
	inst.replaced, inst.cancelReplaced = context.WithCancel(context.Background())
	return inst, nil
}

// setCurrent makes inst (nil: none) the instance callers get and wakes the
// callers waiting for a change. The instance it replaces ends its
// long-lived calls (Host.Watch) now; its other calls in flight go on.
func (m *managed) setCurrent(inst *instance) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setCurrentLocked(inst)
}

// setCurrentLocked is setCurrent with m.mu held.
func (m *managed) setCurrentLocked(inst *instance) {
	if m.cur != nil && m.cur != inst {
		m.cur.cancelReplaced()
	}
	m.cur = inst
	m.probeMissed = 0
	if inst != nil {
		m.infos = inst.infos
		m.failedLaunches = 0
		m.idle = false
	}
	m.wakeLocked()
}

// wakeLocked wakes the callers waiting for a change of the plugin's
// instance or state. m.mu is held.
func (m *managed) wakeLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *managed) noteError(err error) {
	m.mu.Lock()
	m.lastErr = err
	m.mu.Unlock()
}

// noteLaunchFailure records a failed launch while the plugin is down.
func (m *managed) noteLaunchFailure(err error) {
	m.mu.Lock()
	m.lastErr = err
	m.failedLaunches++
	m.mu.Unlock()
}

// relaunched makes a freshly launched instance current after a restart or
// a reload, counting it.
func (m *managed) relaunched(inst *instance) {
	m.mu.Lock()
	m.restarts++
	m.mu.Unlock()
	m.setCurrent(inst)
	m.h.rebuildRoutes()
}

// launchFor launches the instance a reload asks for, with the request's
// stanza when it brings one; the stanza is adopted only if the launch
// succeeds, so a bad new config leaves the old one in force.
func (m *managed) launchFor(req reloadReq) (*instance, error) {
	args, config := m.args, m.config
	if req.stanza != nil {
		config = req.stanza.Config
		if !m.builtin { // a built-in's args are the serve command's
			args = req.stanza.Args
		}
	}
	inst, err := m.launchWith(req.ctx, args, config, m.h.startTimeout)
	if err != nil {
		return nil, err
	}
	m.mu.Lock() // changedSince reads them from other goroutines
	m.args, m.config = args, config
	m.mu.Unlock()
	return inst, nil
}

// changedSince says why the plugin needs a reload, or "" when it does not:
// its binary on disk is not the one its instance runs, its stanza differs
// from next (nil: not compared), or it is down.
func (m *managed) changedSince(next *Stanza) string {
	m.mu.Lock()
	cur, args, idle := m.cur, m.args, m.idle
	m.mu.Unlock()
	if idle {
		// Nothing runs that a new binary would replace; only a config
		// block (a lazy plugin has none) is checked by a launch now.
		if next != nil && next.Config != nil {
			return "a config block was added to an idle plugin; starting it to check the config"
		}
		return ""
	}
	if cur == nil || cur.down() {
		return "plugin is down"
	}
	fi, err := os.Stat(m.path)
	if err != nil {
		return "binary: " + err.Error()
	}
	if !os.SameFile(fi, cur.bin) || fi.Size() != cur.bin.Size() || !fi.ModTime().Equal(cur.bin.ModTime()) {
		return "binary " + m.path + " was replaced"
	}
	if next == nil {
		return ""
	}
	if !m.builtin && !slices.Equal(args, next.Args) {
		return "args changed"
	}
	return cur.config.configChange(next.Config)
}

// run is the owner goroutine of one plugin. It watches the current instance,
// restarts it with backoff when it exits, performs reloads, and kills the
// process when the host closes.
func (m *managed) run(inst *instance) {
	defer m.h.wg.Done()
	stopped := m.h.ctx.Done()
	probe := time.NewTicker(m.h.probeInterval)
	defer probe.Stop()
	var last time.Duration // delay of the last restart; 0: none yet
	var lazyDelay time.Duration
	for {
		if inst == nil && m.isIdle() {
			var ok bool
			if inst, ok = m.idleWait(&lazyDelay); !ok {
				return
			}
			continue
		}
		if inst == nil {
			delay := m.h.backoff.next(last)
			last = delay
			timer := time.NewTimer(delay)
			select {
			case <-stopped:
				timer.Stop()
				return
			case req := <-m.reloadc:
				timer.Stop()
				inst = m.reloadDown(req)
				continue
			case <-m.live.removec:
				timer.Stop()
				m.removeNow(nil)
				return
			case <-timer.C:
			}
			n, err := m.launch(m.h.ctx)
			if err != nil {
				m.noteLaunchFailure(err)
				m.log.Error("plugin restart failed", "error", err, "next_delay", m.h.backoff.next(last))
				continue
			}
			inst = n
			m.relaunched(inst)
			m.log.Info("plugin restarted", "pid", inst.pid)
			continue
		}

		select {
		case <-stopped:
			m.setCurrent(nil)
			inst.client.Kill()
			return
		case <-m.live.removec:
			m.removeNow(inst)
			return
		case <-probe.C:
			m.probe(inst)
		case <-inst.done:
			last = m.lost(inst, last, "exited")
			inst = nil
		case <-inst.broken:
			last = m.lost(inst, last, "lost its connection")
			inst = nil
		case req := <-m.reloadc:
			n, err := m.launchFor(req)
			if err != nil {
				m.noteError(err)
				m.log.Error("plugin reload failed; keeping the running instance", "error", err)
				req.reply <- err
				continue
			}
			old := inst
			inst = n
			m.relaunched(n)
			m.log.Info("plugin reloaded", "pid", n.pid, "old_pid", old.pid)
			m.retire(old)
			req.reply <- nil
		}
	}
}

// lost takes down an instance that exited or broke and returns the backoff
// state for its restart: a long-lived instance restarts after the initial
// delay, a short-lived one after a doubled delay.
func (m *managed) lost(inst *instance, last time.Duration, what string) time.Duration {
	uptime := time.Since(inst.started)
	if uptime >= m.h.backoff.ResetAfter {
		last = 0
	}
	m.noteError(fmt.Errorf("plugin process %d %s after %s", inst.pid, what, uptime.Round(time.Millisecond)))
	m.log.Error("plugin "+what+"; restarting", "pid", inst.pid, "uptime", uptime, "delay", m.h.backoff.next(last))
	m.setCurrent(nil)
	inst.kill()
	return last
}

// reloadDown serves a reload that arrives while the plugin is down: launch
// now instead of waiting out the backoff.
func (m *managed) reloadDown(req reloadReq) *instance {
	n, err := m.launchFor(req)
	if err != nil {
		req.reply <- err
		m.noteLaunchFailure(err)
		return nil
	}
	// The new instance serves before Reload returns, as on the running
	// path: a call right after Reload must not find the plugin down.
	m.relaunched(n)
	req.reply <- nil
	m.log.Info("plugin reloaded while down", "pid", n.pid)
	return n
}

// retire kills an instance that is no longer current once its calls in
// flight have finished, or after DrainTimeout.
func (m *managed) retire(old *instance) {
	drained := make(chan struct{})
	go func() {
		old.refs.Wait()
		close(drained)
	}()
	timer := time.NewTimer(m.h.drainTimeout)
	defer timer.Stop()
	select {
	case <-drained:
	case <-timer.C:
		m.log.Warn("calls still in flight on the old plugin instance; killing it", "pid", old.pid,
			"waited", m.h.drainTimeout)
		killGroup(old.proc.Pid) // the calls may hang because the plugin does
		_ = old.proc.Kill()
	case <-m.h.ctx.Done():
	}
	old.client.Kill()
	m.log.Info("old plugin instance stopped", "pid", old.pid)
}

// acquire returns the current instance and its interface for kind ("":
// any, no interface), holding a reference the caller must release with
// inst.refs.Done(). While the plugin is down it waits up to CallWait for a
// new instance; an idle plugin is started, and waited for until its launch
// succeeds or fails.
func (m *managed) acquire(ctx context.Context, kind string) (*instance, any, error) {
	var expired <-chan time.Time
	tries := -1 // an idle plugin's start: not asked for yet
	for {
		m.mu.Lock()
		if m.live.removed {
			m.mu.Unlock()
			return nil, nil, unavailable(m.name, errRemoved)
		}
		inst, changed, lastErr := m.cur, m.changed, m.lastErr
		if inst != nil && !inst.down() {
			raw, ok := inst.kinds[kind]
			if !ok && kind != "" {
				m.mu.Unlock()
				return nil, nil, fmt.Errorf("%w: plugin %q does not serve kind %q", ErrUnknownPlugin, m.name, kind)
			}
			inst.refs.Add(1)
			m.mu.Unlock()
			return inst, raw, nil
		}
		if m.idle {
			err := m.awaitStartLocked(&tries)
			m.mu.Unlock()
			if err != nil {
				return nil, nil, err
			}
			// The launch is bounded by StartTimeout; wait for its end.
			select {
			case <-changed:
			case <-ctx.Done():
				return nil, nil, unavailable(m.name, fmt.Errorf("waiting for its start: %w", ctx.Err()))
			case <-m.h.ctx.Done():
				return nil, nil, ErrClosed
			}
			continue
		}
		m.mu.Unlock()

		if expired == nil {
			if m.h.callWait <= 0 {
				return nil, nil, unavailable(m.name, downErr(lastErr))
			}
			timer := time.NewTimer(m.h.callWait)
			defer timer.Stop()
			expired = timer.C
		}
		select {
		case <-changed:
		case <-expired:
			return nil, nil, unavailable(m.name, downErr(lastErr))
		case <-ctx.Done():
			return nil, nil, unavailable(m.name, ctx.Err())
		case <-m.h.ctx.Done():
			return nil, nil, ErrClosed
		}
	}
}

// isIdle reports whether the plugin is idle (lazy.go).
func (m *managed) isIdle() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.idle
}

// isDown reports whether the plugin has no live instance right now.
func (m *managed) isDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur == nil || m.cur.down()
}

func (m *managed) lastError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

func downErr(lastErr error) error {
	if lastErr == nil {
		return errors.New("plugin is down")
	}
	return fmt.Errorf("plugin is down: %w", lastErr)
}

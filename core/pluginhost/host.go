// Package pluginhost launches the agent's plugins, keeps them running and
// routes calls to them.
//
// Every plugin, built-in or third-party, is a separate process spoken to
// over gRPC with hashicorp/go-plugin. Each has an owner goroutine that
// restarts it with exponential backoff when it exits and swaps in a fresh
// process on Reload. Callers never hold a process: they go through the Host
// (Get's typed view of a kind, or the routers built on it: Schedulers,
// Drivers, CSIBridge, GC) and get the current instance for the duration of
// one call, so a crash costs at most the calls in flight
// (ErrPluginUnavailable) and a reload costs nothing.
package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Host runs the configured plugins. It is safe for concurrent use.
type Host struct {
	log   hclog.Logger
	kinds map[string]Kind
	// set is the plugin set in force, replaced whole (never modified) when
	// a reload adds or removes a plugin, so that callers, Status and the
	// routers read it without a lock (live.go).
	set          atomic.Pointer[pluginSet]
	callWait     time.Duration
	drainTimeout time.Duration
	startTimeout time.Duration
	// discoveryTimeout bounds the first launch of an unconfigured
	// plugin_dir file (Config.DiscoveryTimeout).
	discoveryTimeout time.Duration
	// unansweredAfter and probeInterval: Config's (health.go).
	unansweredAfter, probeInterval time.Duration
	backoff                        Backoff

	// What a reload lays the set out from again (live.go): the built-ins
	// (fixed), plugin_dir, the drover binary, and the stanzas in force.
	builtins  []Builtin
	pluginDir string
	selfExe   string
	// reloadMu serialises reloads: one at a time changes the set, and a
	// reload of named plugins sees a set that does not change under it.
	// It guards stanzas and skipped.
	reloadMu sync.Mutex
	stanzas  []Stanza
	// skipped are the plugin_dir files found not to be plugins, as they
	// were on disk then: a reload tries such a file again only once it
	// changed, rather than warning about it on every reload.
	skipped map[string]os.FileInfo

	routesMu sync.Mutex // serialises rebuilds
	routes   atomic.Pointer[routeTable]

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	// lifeMu orders Close against a reload starting a new plugin's owner
	// goroutine: once Close has cancelled ctx, no owner is added to wg.
	lifeMu sync.Mutex
	wg     sync.WaitGroup // owner goroutines
}

// New validates cfg, launches every plugin and returns once all of them have
// completed their handshake and KindSpec.Init. It fails, leaving nothing
// running, if any plugin cannot be launched: a broken install or config is
// reported at agent start rather than discovered at the first eval. A lazy
// built-in (Builtin.Lazy) is not launched but declared in process, and
// stays idle until first needed (lazy.go). ctx bounds the initial launches
// only.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.Default()
	}
	h := &Host{
		log:          cfg.Logger,
		kinds:        map[string]Kind{},
		callWait:     cfg.CallWait,
		drainTimeout: cfg.DrainTimeout,
		startTimeout: cfg.StartTimeout,
		backoff:      cfg.Backoff.withDefaults(),
	}
	if h.drainTimeout <= 0 {
		h.drainTimeout = 30 * time.Second
	}
	if h.startTimeout <= 0 {
		h.startTimeout = time.Minute
	}
	h.discoveryTimeout = cfg.DiscoveryTimeout
	if h.discoveryTimeout <= 0 {
		h.discoveryTimeout = DefaultDiscoveryTimeout
	}
	h.discoveryTimeout = min(h.discoveryTimeout, h.startTimeout)
	h.unansweredAfter, h.probeInterval = cfg.UnansweredAfter, cfg.ProbeInterval
	if h.unansweredAfter <= 0 {
		h.unansweredAfter = DefaultUnansweredAfter
	}
	if h.probeInterval <= 0 {
		h.probeInterval = DefaultProbeInterval
	}
	for _, k := range builtinKinds() {
		h.kinds[k.name] = k
	}
	for _, k := range cfg.Kinds {
		if _, taken := h.kinds[k.name]; taken || k.name == exitKind {
			return nil, fmt.Errorf("pluginhost: kind %q is reserved", k.name)
		}
		if k.plugin == nil || k.init == nil {
			return nil, fmt.Errorf("pluginhost: kind %q has no Plugin (build it with NewKind)", k.name)
		}
		h.kinds[k.name] = k
	}
	for _, b := range cfg.Builtins {
		if _, ok := h.kinds[b.Kind]; !ok {
			return nil, fmt.Errorf("pluginhost: built-in %q has unknown kind %q", b.Name, b.Kind)
		}
		if cfg.SelfExe == "" {
			return nil, errors.New("pluginhost: SelfExe is required to run built-in plugins")
		}
	}
	h.builtins, h.pluginDir, h.selfExe = cfg.Builtins, cfg.PluginDir, cfg.SelfExe
	h.stanzas, h.skipped = cfg.Stanzas, map[string]os.FileInfo{}
	var files []string
	if cfg.PluginDir != "" {
		var err error
		if files, err = pluginFiles(cfg.PluginDir); err != nil {
			return nil, err
		}
	}
	all, errs := h.layout(cfg.Stanzas, files, nil)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.routes.Store(&routeTable{})
	h.set.Store(newPluginSet(nil))

	// A lazy plugin is declared in process and stays idle; the others
	// launch now, in parallel.
	var plugins []*managed
	for _, m := range all {
		if m.lazy {
			decl, err := h.declare(ctx, m)
			if err == nil {
				m.idle, m.infos = true, map[string]any{m.kind: decl}
				continue
			}
			h.log.Warn("cannot declare a lazy plugin in process; launching it now", "name", m.name, "error", err)
			m.lazy = false
		}
		plugins = append(plugins, m)
	}
	first, errs := h.launchFirst(ctx, plugins)
	// A plugin_dir file that no stanza names and that is no drover plugin
	// (a README made executable, a helper script) is skipped, not fatal.
	var kept []*managed
	var keptFirst []*instance
	var fatal []error
	for i, m := range plugins {
		switch {
		case errs[i] == nil:
			kept, keptFirst = append(kept, m), append(keptFirst, first[i])
		case m.optional && ctx.Err() == nil && h.ctx.Err() == nil && !isConfigRefusal(errs[i]):
			h.skip(m, errs[i])
		default:
			fatal = append(fatal, errs[i])
		}
	}
	if err := errors.Join(fatal...); err != nil {
		for _, inst := range keptFirst {
			// A graceful stop: the plugin removes its socket file.
			inst.cancelReplaced()
			inst.client.Kill()
		}
		h.cancel()
		return nil, err
	}
	for i, m := range kept {
		m.setCurrent(keptFirst[i])
	}
	// The set keeps config order, idle plugins in their place.
	var set []*managed
	for _, m := range all {
		if m.idle || slices.Contains(kept, m) {
			set = append(set, m)
		}
	}
	for _, m := range set {
		h.wg.Add(1)
		go m.run(m.cur)
	}
	h.set.Store(newPluginSet(set))
	h.rebuildRoutes()
	for _, st := range h.Status() {
		if st.Idle {
			h.log.Debug("plugin idle; it starts when first needed", "name", st.Name, "kind", strings.Join(st.Kinds, ","))
			continue
		}
		logLoaded(h.log, "plugin loaded", st)
	}
	return h, nil
}

// logLoaded logs one plugin that came up (at start, or added by a reload).
func logLoaded(log hclog.Logger, msg string, st PluginStatus) {
	log.Info(msg, "name", st.Name, "kind", strings.Join(st.Kinds, ","), "version", st.Version,
		"builtin", st.Builtin, "path", st.Path, "pid", st.Pid)
}

// launchFirst launches the first instance of every plugin of ms, in
// parallel: a plugin_dir file no stanza names within the discovery
// deadline, every other plugin within the start timeout.
func (h *Host) launchFirst(ctx context.Context, ms []*managed) ([]*instance, []error) {
	first := make([]*instance, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() {
			timeout := h.startTimeout
			if m.optional {
				timeout = h.discoveryTimeout
			}
			first[i], errs[i] = m.launchWith(ctx, m.args, m.config, timeout)
		})
	}
	wg.Wait()
	return first, errs
}

// skip warns about a plugin_dir file that no stanza names and that failed
// its first launch, and remembers the file so that a reload does not try
// it again until it changes.
func (h *Host) skip(m *managed, err error) {
	h.log.Warn("skipping a file in plugin_dir that is not a drover plugin; configure it with a plugin stanza "+
		"to make its failure fatal, or remove it", "file", m.path, "error", err)
	if fi, serr := os.Stat(m.path); serr == nil {
		h.skipped[m.name] = fi
	}
}

func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return fmt.Errorf("pluginhost: invalid plugin name %q: a plugin is named after its file in plugin_dir", name)
	}
	return nil
}

// pluginFiles lists the plugin candidates in dir, sorted: the regular
// files (symbolic links followed) with an execute bit, hidden ones aside.
func pluginFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pluginhost: plugin_dir: %w", err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		out = append(out, e.Name())
	}
	return out, nil // ReadDir sorts by name
}

func builtinNames(bs []Builtin) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Close stops supervising and kills every plugin process, then waits for
// the owner goroutines. Calls in flight fail with ErrPluginUnavailable;
// later calls fail with ErrClosed. Close may be called more than once.
func (h *Host) Close() error {
	h.lifeMu.Lock()
	h.cancel()
	h.lifeMu.Unlock()
	h.wg.Wait()
	return nil
}

// Reload replaces every plugin's process with a freshly launched one, which
// picks up a new binary on disk. For each plugin, callers switch to the new
// instance atomically once its handshake and KindSpec.Init (a scheduler's Info)
// have succeeded; the old instance then finishes its calls in flight (up to
// DrainTimeout) and is killed, while long-lived calls (Watch) on it end at
// once. A plugin whose new launch fails keeps its running instance, and its
// error is returned. Plugins reload concurrently; ctx bounds each launch's
// KindSpec.Init.
//
// An idle plugin (Builtin.Lazy, not started yet) has no process to replace
// and stays idle: its first start runs the binary on disk then.
//
// The agent's SIGHUP uses ReloadChanged, which spares unchanged plugins.
func (h *Host) Reload(ctx context.Context) error {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	return h.reload(ctx, h.set.Load().list, nil)
}

// ReloadPlugin reloads the one plugin name as Reload does: only its calls
// in flight are drained, calls to every other plugin go on. An unknown name
// fails with ErrUnknownPlugin, and a failed launch with its error (the
// running instance stays). An idle plugin stays idle, as with Reload.
func (h *Host) ReloadPlugin(ctx context.Context, name string) error {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	m, ok := h.set.Load().byName[name]
	if !ok {
		return h.unknown(name)
	}
	return h.reload(ctx, []*managed{m}, nil)
}

// reload sends one reload request to each plugin's owner (with news[i], if
// any, as its new stanza) and waits for every answer.
func (h *Host) reload(ctx context.Context, ms []*managed, news []*Stanza) error {
	reqs := make([]reloadReq, len(ms))
	for i, m := range ms {
		reqs[i] = reloadReq{ctx: ctx, reply: make(chan error, 1)}
		if news != nil {
			reqs[i].stanza = news[i]
		}
		select {
		case m.reloadc <- reqs[i]:
		case <-m.live.gone:
			reqs[i].reply <- fmt.Errorf("%w %q: it was removed", ErrUnknownPlugin, m.name)
		case <-h.ctx.Done():
			return ErrClosed
		}
	}
	var errs []error
	for _, r := range reqs {
		errs = append(errs, <-r.reply)
	}
	return errors.Join(errs...)
}

func (h *Host) unknown(name string) error {
	plugins := h.set.Load().list
	names := make([]string, 0, len(plugins))
	for _, m := range plugins {
		names = append(names, m.name)
	}
	return fmt.Errorf("%w %q: this agent's plugins are %s", ErrUnknownPlugin, name, listOrNone(names))
}

// call runs fn with plugin name's client for kind (Clients.Call is its
// typed face), holding the current instance for the duration of fn so a
// reload waits for it. fn's error is classified: a failure caused by the
// process dying wraps ErrPluginUnavailable. While the plugin is down call
// waits up to CallWait for it to come back.
func (h *Host) call(ctx context.Context, name, kind string, fn func(ctx context.Context, raw any) error) error {
	inst, raw, release, err := h.dispense(ctx, name, kind)
	if err != nil {
		return err
	}
	defer release()
	err = classify(ctx, name, inst.down(), fn(ctx, raw))
	if errors.Is(err, ErrPluginUnavailable) && !inst.down() && !inst.healthy(h.ctx) {
		// The process died but its exit is not reaped yet: mark it now so
		// the next call waits for the restart instead of failing too.
		inst.markBroken()
	}
	return err
}

// watch runs a long-lived call that a reload does not wait for
// (Clients.Watch is its typed face): it holds no reference on the
// instance, and a reload or restart that replaces the instance cancels
// fn's context and fails the call with ErrPluginUnavailable.
func (h *Host) watch(ctx context.Context, name, kind string, fn func(ctx context.Context, raw any) error) error {
	inst, raw, release, err := h.dispense(ctx, name, kind)
	if err != nil {
		return err
	}
	release()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(inst.replaced, cancel)()
	err = fn(wctx, raw)
	if err != nil && ctx.Err() == nil && inst.replaced.Err() != nil {
		return unavailable(name, fmt.Errorf("plugin process %d was replaced during the call: %w", inst.pid, err))
	}
	return classify(ctx, name, inst.down(), err)
}

func (h *Host) dispense(ctx context.Context, name, kind string) (*instance, any, func(), error) {
	if h.ctx.Err() != nil {
		return nil, nil, nil, ErrClosed
	}
	m, ok := h.set.Load().byName[name]
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	inst, raw, err := m.acquire(ctx, kind)
	if err != nil {
		return nil, nil, nil, err
	}
	return inst, raw, sync.OnceFunc(inst.refs.Done), nil
}

// Plugins returns the names of the plugins that serve kind, in config
// order. A plugin that is down counts with the kinds it last served.
func (h *Host) Plugins(kind string) []string {
	var names []string
	for _, m := range h.set.Load().list {
		m.mu.Lock()
		_, ok := m.infos[kind]
		m.mu.Unlock()
		if ok {
			names = append(names, m.name)
		}
	}
	return names
}

// info returns the declaration plugin name's Init gave for kind at its
// last successful launch (Clients.Declaration is its typed face), and
// false when the plugin is unknown or does not serve kind.
func (h *Host) info(name, kind string) (any, bool) {
	m, ok := h.set.Load().byName[name]
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.infos[kind]
	return info, ok
}

// Running reports whether plugin name has a live instance right now; false
// for an unknown plugin, while it is down (crashed, restarting) and while
// it is idle (not started yet).
func (h *Host) Running(name string) bool {
	m, ok := h.set.Load().byName[name]
	return ok && !m.isDown()
}

// Available reports whether a call to plugin name may be made now: it
// runs, or it is idle and the call will start it. False for an unknown
// plugin, one that is down (restarting), and an idle one whose last start
// failed until its retry is due.
func (h *Host) Available(name string) bool {
	m, ok := h.set.Load().byName[name]
	return ok && m.available()
}

// PluginStatus describes one plugin for `drover operator plugin list` and
// logs.
type PluginStatus struct {
	Name    string
	Builtin bool
	// Path is the binary the plugin runs: the drover binary for a built-in.
	Path  string
	Kinds []string // sorted; of the last instance that launched
	// Version is what the plugin's Info reported at its last launch.
	Version string
	// JobTypes are the job types a scheduler plugin declared at its last
	// launch, in its order, whether or not it won their routing.
	JobTypes []JobTypeInfo
	Running  bool
	Pid      int       // 0 while down
	Started  time.Time // of the running instance; zero while down
	// Restarts counts relaunches after a crash and reloads.
	Restarts  int
	LastError string // the last crash, failed launch or failed reload; "" if none
	// Health is structs.AgentPluginHealthy while an instance runs,
	// AgentPluginRestarting while it is down awaiting its restart, and
	// AgentPluginFailed once a relaunch has failed (it is still retried),
	// AgentPluginUnhealthy while it runs but does not answer (health.go),
	// with the reason in HealthDescription.
	Health            string
	HealthDescription string
	// Idle: a lazy plugin not started yet (Health structs.AgentPluginIdle,
	// or AgentPluginStarting while it launches, or AgentPluginFailed after
	// a failed start); Kinds, Version and JobTypes are its in-process
	// declaration's.
	Idle bool
}

// Status reports every plugin, in config order.
func (h *Host) Status() []PluginStatus {
	plugins := h.set.Load().list
	out := make([]PluginStatus, 0, len(plugins))
	for _, m := range plugins {
		out = append(out, m.status())
	}
	return out
}

// PluginStatus reports the plugin name, or fails with ErrUnknownPlugin.
func (h *Host) PluginStatus(name string) (PluginStatus, error) {
	m, ok := h.set.Load().byName[name]
	if !ok {
		return PluginStatus{}, h.unknown(name)
	}
	return m.status(), nil
}

func (m *managed) status() PluginStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := PluginStatus{
		Name:     m.name,
		Builtin:  m.builtin,
		Path:     m.path,
		Kinds:    slices.Sorted(maps.Keys(m.infos)),
		Restarts: m.restarts,
		Health:   structs.AgentPluginRestarting,
	}
	for _, k := range st.Kinds {
		if v := m.h.kinds[k].version; v != nil && v(m.infos[k]) != "" {
			st.Version = v(m.infos[k])
			break
		}
	}
	if info := as[*schedulerpb.InfoResponse](m.infos[SchedulerKind.Name()]); info != nil {
		for _, jt := range info.GetJobTypes() {
			b := Behavior(jt)
			st.JobTypes = append(st.JobTypes, JobTypeInfo{Type: jt.GetName(), Plugin: m.name,
				MaxAttempts: b.MaxAttempts, PerNode: b.PerNode, Behavior: b})
		}
	}
	switch {
	case m.cur != nil && !m.cur.down():
		st.Running, st.Pid, st.Started = true, m.cur.pid, m.cur.started
		st.Health = structs.AgentPluginHealthy
		if why := m.unhealthyLocked(time.Now()); why != "" {
			st.Health, st.HealthDescription = structs.AgentPluginUnhealthy, why
		}
	case m.idle:
		m.idleStatusLocked(&st)
	case m.failedLaunches > 0:
		st.Health = structs.AgentPluginFailed
	}
	if m.lastErr != nil {
		st.LastError = m.lastErr.Error()
	}
	return st
}

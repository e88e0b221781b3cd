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
	log          hclog.Logger
	kinds        map[string]Kind
	plugins      []*managed // config order: built-ins, then third-party
	byName       map[string]*managed
	callWait     time.Duration
	drainTimeout time.Duration
	startTimeout time.Duration
	// discoveryTimeout bounds the first launch of an unconfigured
	// plugin_dir file (Config.DiscoveryTimeout).
	discoveryTimeout time.Duration
	// unansweredAfter and probeInterval: Config's (health.go).
	unansweredAfter, probeInterval time.Duration
	backoff                        Backoff

	routesMu sync.Mutex // serialises rebuilds
	routes   atomic.Pointer[routeTable]

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // owner goroutines
}

// New validates cfg, launches every plugin and returns once all of them have
// completed their handshake and KindSpec.Init. It fails, leaving nothing
// running, if any plugin cannot be launched: a broken install or config is
// reported at agent start rather than discovered at the first eval. ctx
// bounds the initial launches only.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.Default()
	}
	h := &Host{
		log:          cfg.Logger,
		kinds:        map[string]Kind{},
		byName:       map[string]*managed{},
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
	if err := h.addPlugins(cfg); err != nil {
		return nil, err
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.routes.Store(&routeTable{})

	first := make([]*instance, len(h.plugins))
	errs := make([]error, len(h.plugins))
	var wg sync.WaitGroup
	for i, m := range h.plugins {
		wg.Go(func() {
			timeout := h.startTimeout
			if m.optional {
				timeout = h.discoveryTimeout
			}
			first[i], errs[i] = m.launchWith(ctx, m.args, m.config, timeout)
		})
	}
	wg.Wait()
	// A plugin_dir file that no stanza names and that is no drover plugin
	// (a README made executable, a helper script) is skipped, not fatal.
	kept := h.plugins[:0]
	var keptFirst []*instance
	var fatal []error
	for i, m := range h.plugins {
		switch {
		case errs[i] == nil:
			kept, keptFirst = append(kept, m), append(keptFirst, first[i])
		case m.optional && ctx.Err() == nil && h.ctx.Err() == nil && !isConfigRefusal(errs[i]):
			h.log.Warn("skipping a file in plugin_dir that is not a drover plugin; configure it with a plugin stanza "+
				"to make its failure fatal, or remove it", "file", m.path, "error", errs[i])
			delete(h.byName, m.name)
		default:
			fatal = append(fatal, errs[i])
		}
	}
	h.plugins = kept
	if err := errors.Join(fatal...); err != nil {
		for _, inst := range keptFirst {
			// A graceful stop: the plugin removes its socket file.
			inst.cancelReplaced()
			inst.client.Kill()
		}
		h.cancel()
		return nil, err
	}
	for i, m := range h.plugins {
		m.setCurrent(keptFirst[i])
		h.wg.Add(1)
		go m.run(keptFirst[i])
	}
	h.rebuildRoutes()
	for _, st := range h.Status() {
		h.log.Info("plugin loaded", "name", st.Name, "kind", strings.Join(st.Kinds, ","), "version", st.Version,
			"builtin", st.Builtin, "path", st.Path, "pid", st.Pid)
	}
	return h, nil
}

func (h *Host) addPlugins(cfg Config) error {
	stanzas := map[string]Stanza{}
	for _, s := range cfg.Stanzas {
		if _, dup := stanzas[s.Name]; dup {
			return fmt.Errorf("pluginhost: plugin %q is configured twice", s.Name)
		}
		stanzas[s.Name] = s
	}
	add := func(m *managed) error {
		if err := checkName(m.name); err != nil {
			return err
		}
		if _, dup := h.byName[m.name]; dup {
			return fmt.Errorf("pluginhost: plugin %q is defined twice", m.name)
		}
		m.h, m.log = h, h.log.Named(m.name)
		m.reloadc, m.changed = make(chan reloadReq), make(chan struct{})
		h.plugins = append(h.plugins, m)
		h.byName[m.name] = m
		return nil
	}
	for _, b := range cfg.Builtins {
		if _, ok := h.kinds[b.Kind]; !ok {
			return fmt.Errorf("pluginhost: built-in %q has unknown kind %q", b.Name, b.Kind)
		}
		if cfg.SelfExe == "" {
			return errors.New("pluginhost: SelfExe is required to run built-in plugins")
		}
		m := &managed{name: b.Name, builtin: true, kind: b.Kind, path: cfg.SelfExe,
			args: []string{ServeCommand, b.Name}, env: b.Env, config: stanzas[b.Name].Config}
		if err := add(m); err != nil {
			return err
		}
	}
	var files []string
	if cfg.PluginDir != "" {
		var err error
		if files, err = pluginFiles(cfg.PluginDir); err != nil {
			return err
		}
	}
	named := map[string]bool{}
	var third []Stanza
	for _, s := range cfg.Stanzas {
		if m, ok := h.byName[s.Name]; ok && m.builtin {
			continue // configures the built-in of that name
		}
		if err := checkName(s.Name); err != nil {
			return err
		}
		if cfg.PluginDir == "" {
			return fmt.Errorf("pluginhost: plugin %q needs plugin_dir: a third-party plugin is the file of its name in plugin_dir", s.Name)
		}
		if !slices.Contains(files, s.Name) {
			return fmt.Errorf("pluginhost: plugin %q: no executable file %q in plugin_dir %s (it holds: %s); "+
				"a plugin stanza's name is the file name of its binary in plugin_dir, or the name of a built-in (%s)",
				s.Name, s.Name, cfg.PluginDir, listOrNone(files), listOrNone(builtinNames(cfg.Builtins)))
		}
		named[s.Name] = true
		third = append(third, s)
	}
	// Files no stanza names load with an empty config, as Nomad loads
	// plugin_dir. They come before the stanzas so that, on a job type two
	// plugins declare, an explicitly configured plugin wins.
	for _, f := range files {
		if named[f] {
			continue
		}
		if m, ok := h.byName[f]; ok && m.builtin {
			h.log.Warn("ignoring a file in plugin_dir named like a built-in plugin; give it another name to load it",
				"file", filepath.Join(cfg.PluginDir, f))
			continue
		}
		m := &managed{name: f, path: filepath.Join(cfg.PluginDir, f), optional: true}
		if err := add(m); err != nil {
			return err
		}
	}
	for _, s := range third {
		m := &managed{name: s.Name, path: filepath.Join(cfg.PluginDir, s.Name), args: s.Args, config: s.Config}
		if err := add(m); err != nil {
			return err
		}
	}
	return nil
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
	h.cancel()
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
// The agent's SIGHUP uses ReloadChanged, which spares unchanged plugins.
func (h *Host) Reload(ctx context.Context) error {
	return h.reload(ctx, h.plugins, nil)
}

// ReloadPlugin reloads the one plugin name as Reload does: only its calls
// in flight are drained, calls to every other plugin go on. An unknown name
// fails with ErrUnknownPlugin, and a failed launch with its error (the
// running instance stays).
func (h *Host) ReloadPlugin(ctx context.Context, name string) error {
	m, ok := h.byName[name]
	if !ok {
		return h.unknown(name)
	}
	return h.reload(ctx, []*managed{m}, nil)
}

// ReloadChanged reloads the plugins whose binary changed on disk since
// their running instance was launched (another file, size or modification
// time), and those whose stanza in stanzas (the agent config as re-read,
// nil: unchanged) differs in config or args from the one in force. It
// returns the names of the plugins it reloaded. A stanza that names no
// loaded plugin, and a loaded third-party plugin whose stanza is gone, are
// reported in the error and otherwise left alone: adding or removing a
// plugin takes an agent restart. A plugin that is down is always reloaded.
func (h *Host) ReloadChanged(ctx context.Context, stanzas []Stanza) ([]string, error) {
	var errs []error
	byName := map[string]Stanza{}
	for _, s := range stanzas {
		byName[s.Name] = s
		if _, ok := h.byName[s.Name]; !ok {
			errs = append(errs, fmt.Errorf("plugin %q: new in the config; adding a plugin takes an agent restart", s.Name))
		}
	}
	var todo []*managed
	var news []*Stanza
	for _, m := range h.plugins {
		var next *Stanza
		if stanzas != nil {
			st, ok := byName[m.name]
			if !ok && !m.builtin && !m.optional {
				errs = append(errs, fmt.Errorf("plugin %q: its stanza is gone from the config; removing a plugin takes an agent restart", m.name))
			} else if !m.builtin {
				next = &Stanza{Name: m.name, Args: st.Args, Config: st.Config}
			} else if ok {
				next = &Stanza{Name: m.name, Config: st.Config}
			} else {
				next = &Stanza{Name: m.name}
			}
		}
		if why := m.changedSince(next); why != "" {
			m.log.Info("plugin changed; reloading it", "change", why)
			todo, news = append(todo, m), append(news, next)
		}
	}
	names := make([]string, 0, len(todo))
	for _, m := range todo {
		names = append(names, m.name)
	}
	if len(todo) == 0 {
		h.log.Info("no plugin changed; none reloaded")
	}
	if err := h.reload(ctx, todo, news); err != nil {
		errs = append(errs, err)
	}
	return names, errors.Join(errs...)
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
	names := make([]string, 0, len(h.plugins))
	for _, m := range h.plugins {
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
	m, ok := h.byName[name]
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
	for _, m := range h.plugins {
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
	m, ok := h.byName[name]
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	info, ok := m.infos[kind]
	return info, ok
}

// Running reports whether plugin name has a live instance right now; false
// for an unknown plugin and while it is down (crashed, restarting).
func (h *Host) Running(name string) bool {
	m, ok := h.byName[name]
	return ok && !m.isDown()
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
}

// Status reports every plugin, in config order.
func (h *Host) Status() []PluginStatus {
	out := make([]PluginStatus, 0, len(h.plugins))
	for _, m := range h.plugins {
		out = append(out, m.status())
	}
	return out
}

// PluginStatus reports the plugin name, or fails with ErrUnknownPlugin.
func (h *Host) PluginStatus(name string) (PluginStatus, error) {
	m, ok := h.byName[name]
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
	case m.failedLaunches > 0:
		st.Health = structs.AgentPluginFailed
	}
	if m.lastErr != nil {
		st.LastError = m.lastErr.Error()
	}
	return st
}

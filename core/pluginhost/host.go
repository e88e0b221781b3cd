// Package pluginhost launches the agent's plugins, keeps them running and
// routes calls to them.
//
// Every plugin, built-in or third-party, is a separate process spoken to
// over gRPC with hashicorp/go-plugin. Each has an owner goroutine that
// restarts it with exponential backoff when it exits and swaps in a fresh
// process on Reload. Callers never hold a process: they go through the Host
// (Call, Dispense, or the Schedulers routing table) and get the current
// instance for the duration of one call, so a crash costs at most the calls
// in flight (ErrPluginUnavailable) and a reload costs nothing.
package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/shared"
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
	backoff      Backoff

	routesMu sync.Mutex // serialises rebuilds
	routes   atomic.Pointer[routeTable]

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // owner goroutines
}

// New validates cfg, launches every plugin and returns once all of them have
// completed their handshake and Kind.Init. It fails, leaving nothing
// running, if any plugin cannot be launched: a broken install or config is
// reported at agent start rather than discovered at the first eval. ctx
// bounds the initial launches only.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.Default()
	}
	h := &Host{
		log:          cfg.Logger,
		kinds:        map[string]Kind{shared.KindScheduler: schedulerKind()},
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
	for name, k := range cfg.Kinds {
		if _, taken := h.kinds[name]; taken || name == exitKind {
			return nil, fmt.Errorf("pluginhost: kind %q is reserved", name)
		}
		if k.Plugin == nil {
			return nil, fmt.Errorf("pluginhost: kind %q has no Plugin", name)
		}
		h.kinds[name] = k
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
		wg.Go(func() { first[i], errs[i] = m.launch(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, inst := range first {
			if inst != nil {
				inst.client.Kill()
			}
		}
		h.cancel()
		return nil, err
	}
	for i, m := range h.plugins {
		m.setCurrent(first[i])
		h.wg.Add(1)
		go m.run(first[i])
	}
	h.rebuildRoutes()
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
		if m.name == "" || strings.ContainsAny(m.name, `/\`) || m.name == "." || m.name == ".." {
			return fmt.Errorf("pluginhost: invalid plugin name %q", m.name)
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
			args: []string{"plugin", b.Name}, env: b.Env, config: stanzas[b.Name].Config}
		if err := add(m); err != nil {
			return err
		}
	}
	for _, s := range cfg.Stanzas {
		if m, ok := h.byName[s.Name]; ok && m.builtin {
			continue // configures the built-in of that name
		}
		if cfg.PluginDir == "" {
			return fmt.Errorf("pluginhost: plugin %q needs plugin_dir", s.Name)
		}
		m := &managed{name: s.Name, path: filepath.Join(cfg.PluginDir, s.Name), args: s.Args, config: s.Config}
		if err := add(m); err != nil {
			return err
		}
	}
	return nil
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
// instance atomically once its handshake and Kind.Init (a scheduler's Info)
// have succeeded; the old instance then finishes its calls in flight (up to
// DrainTimeout) and is killed. A plugin whose new launch fails keeps its
// running instance, and its error is returned. Plugins reload concurrently;
// ctx bounds each launch's Kind.Init.
func (h *Host) Reload(ctx context.Context) error {
	reqs := make([]reloadReq, len(h.plugins))
	for i, m := range h.plugins {
		reqs[i] = reloadReq{ctx: ctx, reply: make(chan error, 1)}
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

// Call runs fn with plugin name's interface for kind (for the driver kind,
// whatever the driver Kind's GRPCClient returns), holding the current
// instance for the duration of fn so a reload waits for it. fn's error is
// classified: a failure caused by the process dying wraps
// ErrPluginUnavailable. While the plugin is down Call waits up to CallWait
// for it to come back.
func (h *Host) Call(ctx context.Context, name, kind string, fn func(ctx context.Context, raw any) error) error {
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

// Dispense returns plugin name's interface for kind and a release function
// that must be called once the caller is done with it. It is for callers
// that hold a plugin across several calls or a stream (a driver's task
// wait): until release, a Reload waits (up to DrainTimeout) before killing
// the instance. Prefer Call for single calls; it also classifies errors. The
// interface must not be used after release.
func (h *Host) Dispense(ctx context.Context, name, kind string) (raw any, release func(), err error) {
	_, raw, release, err = h.dispense(ctx, name, kind)
	return raw, release, err
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

// PluginStatus describes one plugin for `drover plugin status` and logs.
type PluginStatus struct {
	Name    string
	Builtin bool
	Kinds   []string // sorted; of the last instance that launched
	Running bool
	Pid     int // 0 while down
	// Restarts counts relaunches after a crash (reloads do not count).
	Restarts  int
	LastError string // the last crash or failed launch; "" if none
}

// Status reports every plugin, in config order.
func (h *Host) Status() []PluginStatus {
	out := make([]PluginStatus, 0, len(h.plugins))
	for _, m := range h.plugins {
		m.mu.Lock()
		st := PluginStatus{
			Name:     m.name,
			Builtin:  m.builtin,
			Kinds:    slices.Sorted(maps.Keys(m.infos)),
			Restarts: m.restarts,
		}
		if m.cur != nil && !m.cur.down() {
			st.Running, st.Pid = true, m.cur.pid
		}
		if m.lastErr != nil {
			st.LastError = m.lastErr.Error()
		}
		m.mu.Unlock()
		out = append(out, st)
	}
	return out
}

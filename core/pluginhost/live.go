package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// The plugin set is live: a reload (ReloadChanged, the agent's SIGHUP)
// lays the set out again from the stanzas and the files in plugin_dir, and
// starts what is new and removes what is gone, besides relaunching what
// changed.
//
// Readers (every call, Status, the routers) load the set through one
// atomic pointer and never lock: a set is never modified once stored, a
// reload stores a new one. A removed plugin leaves the set, and so the
// routes, before its drain begins, so no new call reaches it; a call that
// already holds its instance finishes (up to DrainTimeout), and only then
// is the process stopped and its owner goroutine ends. Its job types are
// then not served, unless another plugin declares them too, which takes
// them over at once.

// pluginSet is one immutable plugin set: the plugins in config order
// (built-ins, then plugin_dir files no stanza names, then stanzas), which
// decides job-type ties, and the same by name.
type pluginSet struct {
	list   []*managed
	byName map[string]*managed
}

func newPluginSet(list []*managed) *pluginSet {
	s := &pluginSet{list: list, byName: make(map[string]*managed, len(list))}
	for _, m := range list {
		s.byName[m.name] = m
	}
	return s
}

// plugin returns the plugin name of the set in force.
func (h *Host) plugin(name string) (*managed, bool) {
	m, ok := h.set.Load().byName[name]
	return m, ok
}

// layout returns the plugins that the built-ins, the stanzas and the
// plugin_dir files make, in config order: built-ins, then the files no
// stanza names, then the stanzas in file order. A plugin of cur (the set in
// force; nil at start) is kept as it is; the others are built, not yet
// launched. A stanza that cannot be a plugin (a bad name, named twice, no
// file of its name) is an error and is left out, except that a running
// plugin whose file is gone but whose stanza is still there is kept: the
// config still asks for it.
func (h *Host) layout(stanzas []Stanza, files []string, cur map[string]*managed) ([]*managed, []error) {
	var out []*managed
	var errs []error
	builtin := map[string]bool{}
	reuse := func(name string, build func() *managed) {
		if m, ok := cur[name]; ok {
			out = append(out, m)
			return
		}
		m := build()
		m.h, m.log = h, h.log.Named(m.name)
		m.reloadc, m.changed = make(chan reloadReq), make(chan struct{})
		m.startc = make(chan struct{}, 1)
		m.live = newLiveState()
		out = append(out, m)
	}
	byName := map[string]Stanza{}
	for _, s := range stanzas {
		if _, dup := byName[s.Name]; dup {
			errs = append(errs, fmt.Errorf("pluginhost: plugin %q is configured twice", s.Name))
			continue
		}
		byName[s.Name] = s
	}
	for _, b := range h.builtins {
		if builtin[b.Name] {
			errs = append(errs, fmt.Errorf("pluginhost: plugin %q is defined twice", b.Name))
			continue
		}
		if err := checkName(b.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		builtin[b.Name] = true
		reuse(b.Name, func() *managed {
			config := byName[b.Name].Config
			return &managed{name: b.Name, builtin: true, kind: b.Kind, path: h.selfExe,
				args: []string{ServeCommand, b.Name}, env: b.Env, config: config,
				// A config block is checked by a launch at start.
				lazy: b.Lazy && b.Declare != nil && config == nil, declare: b.Declare, idleFingerprint: b.Fingerprint}
		})
	}
	named := map[string]bool{}
	var third []Stanza
	for _, s := range stanzas {
		if builtin[s.Name] || named[s.Name] {
			continue // configures the built-in of that name, or a duplicate
		}
		if err := checkName(s.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		named[s.Name] = true
		if h.pluginDir == "" {
			errs = append(errs, fmt.Errorf("pluginhost: plugin %q needs plugin_dir: a third-party plugin is the file of its name in plugin_dir", s.Name))
			continue
		}
		if !slices.Contains(files, s.Name) {
			errs = append(errs, fmt.Errorf("pluginhost: plugin %q: no executable file %q in plugin_dir %s (it holds: %s); "+
				"a plugin stanza's name is the file name of its binary in plugin_dir, or the name of a built-in (%s)",
				s.Name, s.Name, h.pluginDir, listOrNone(files), listOrNone(builtinNames(h.builtins))))
			if _, running := cur[s.Name]; !running {
				continue
			}
		}
		third = append(third, s)
	}
	// Files no stanza names load with an empty config, as Nomad loads
	// plugin_dir. They come before the stanzas so that, on a job type two
	// plugins declare, an explicitly configured plugin wins.
	for _, f := range files {
		if named[f] {
			continue
		}
		if builtin[f] {
			h.log.Warn("ignoring a file in plugin_dir named like a built-in plugin; give it another name to load it",
				"file", filepath.Join(h.pluginDir, f))
			continue
		}
		reuse(f, func() *managed {
			return &managed{name: f, path: filepath.Join(h.pluginDir, f), optional: true}
		})
	}
	for _, s := range third {
		reuse(s.Name, func() *managed {
			return &managed{name: s.Name, path: filepath.Join(h.pluginDir, s.Name), args: s.Args, config: s.Config}
		})
	}
	return out, errs
}

// liveState is what removing a plugin needs of its managed.
type liveState struct {
	// removec asks the owner goroutine to take the plugin down for good.
	removec chan struct{}
	// gone is closed once the owner has stopped the plugin and returns.
	gone chan struct{}
	// removed (under managed.mu) refuses new calls: acquire fails at once
	// rather than waiting for an instance that will never come.
	removed bool
}

func newLiveState() liveState {
	return liveState{removec: make(chan struct{}), gone: make(chan struct{})}
}

// errRemoved is why a call that reached a removed plugin failed.
var errRemoved = errors.New("the plugin was removed from the agent by a reload")

// removeNow is the owner goroutine's last act for a removed plugin: refuse
// new calls, wait for the calls in flight on inst (nil: the plugin is
// down) up to DrainTimeout, stop the process, and say it is gone.
func (m *managed) removeNow(inst *instance) {
	defer close(m.live.gone)
	m.mu.Lock()
	m.live.removed = true
	m.mu.Unlock()
	// Wakes callers waiting for the plugin to come back (they now see it
	// removed) and ends its long-lived calls (Watch).
	m.setCurrent(nil)
	if inst != nil {
		m.retire(inst)
	}
}

// ReloadResult says what a reload changed, by plugin name.
type ReloadResult struct {
	// Added are the plugins a reload started: a new stanza, or a new file
	// in plugin_dir that is a plugin.
	Added []string
	// Removed are the plugins whose stanza and file are gone; they were
	// drained and stopped.
	Removed []string
	// Reloaded are the plugins relaunched because their binary on disk or
	// their stanza changed, or because they were down.
	Reloaded []string
}

// ReloadChanged brings the running plugins in line with stanzas (the agent
// config as re-read; nil: the stanzas in force) and with plugin_dir as it is
// now:
//
//   - A stanza or plugin_dir file that is new is launched as at start: a
//     file no stanza names that is no drover plugin is skipped with a
//     warning (and not tried again until it changes); a new stanza whose
//     launch fails is an error of the result. Once up, its job types,
//     collections or driver are routed.
//   - A third-party plugin whose stanza and file are both gone is removed:
//     taken out of routing first, then drained (up to DrainTimeout), then
//     stopped. Built-ins are never removed.
//   - A plugin whose binary on disk changed since its instance launched, or
//     whose stanza differs from the one in force, is relaunched as Reload
//     does; so is a plugin that is down. An idle plugin (not started yet)
//     stays idle, unless its stanza now has a config block: it is started
//     then, to check the config as at start.
//
// One failure does not stop the rest of the reload: the error joins them
// all, and the result lists what was done. Reloads are serialised.
func (h *Host) ReloadChanged(ctx context.Context, stanzas []Stanza) (ReloadResult, error) {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	var res ReloadResult
	if h.ctx.Err() != nil {
		return res, ErrClosed
	}
	given := stanzas != nil
	if !given {
		stanzas = h.stanzas
	}
	var files []string
	if h.pluginDir != "" {
		var err error
		if files, err = pluginFiles(h.pluginDir); err != nil {
			// Without the listing nothing can be told gone: change nothing.
			return res, err
		}
	}
	cur := h.set.Load()
	list, errs := h.layout(stanzas, files, cur.byName)

	// Start what is new, in parallel, as New does.
	var fresh []*managed
	for _, m := range list {
		if _, ok := cur.byName[m.name]; ok {
			continue
		}
		if m.optional && h.unchangedSkip(m) {
			continue
		}
		fresh = append(fresh, m)
	}
	first, launchErrs := h.launchFirst(ctx, fresh)
	failed := map[*managed]bool{}
	for i, m := range fresh {
		switch err := launchErrs[i]; {
		case err == nil:
			delete(h.skipped, m.name)
		case m.optional && ctx.Err() == nil && h.ctx.Err() == nil:
			h.skip(m, err)
			failed[m] = true
		default:
			errs = append(errs, err)
			failed[m] = true
		}
	}
	var started []*managed
	for i, m := range fresh {
		if failed[m] {
			continue
		}
		if err := h.startOwner(m, first[i]); err != nil {
			for _, inst := range first[i+1:] {
				if inst != nil {
					inst.kill()
				}
			}
			return res, err
		}
		started = append(started, m)
	}
	list = slices.DeleteFunc(list, func(m *managed) bool {
		_, running := cur.byName[m.name]
		return !running && !slices.Contains(started, m)
	})

	// One store changes the set for every reader; the routes follow.
	next := newPluginSet(list)
	var removed []*managed
	for _, m := range cur.list {
		if _, kept := next.byName[m.name]; !kept {
			removed = append(removed, m)
		}
	}
	h.set.Store(next)
	h.rebuildRoutes()
	for _, m := range started {
		res.Added = append(res.Added, m.name)
		logLoaded(h.log, "plugin added", m.status())
	}

	// Drain and stop the removed plugins, all at once.
	var wg sync.WaitGroup
	for _, m := range removed {
		res.Removed = append(res.Removed, m.name)
		wg.Go(func() {
			start := time.Now()
			select {
			case m.live.removec <- struct{}{}:
			case <-h.ctx.Done():
				return // Close stops it
			}
			<-m.live.gone
			h.log.Info("plugin removed", "name", m.name, "path", m.path, "took", time.Since(start).Round(time.Millisecond))
		})
	}
	wg.Wait()

	// Relaunch what changed among the plugins that were already running.
	byName := map[string]Stanza{}
	for _, s := range stanzas {
		if _, dup := byName[s.Name]; !dup {
			byName[s.Name] = s
		}
	}
	var todo []*managed
	var news []*Stanza
	for _, m := range list {
		if _, ok := cur.byName[m.name]; !ok {
			continue // just started
		}
		var want *Stanza
		if given {
			st, ok := byName[m.name]
			if !ok {
				st = Stanza{Name: m.name} // a built-in or a file without a stanza: no config
			}
			want = &st
		}
		if why := m.changedSince(want); why != "" {
			m.log.Info("plugin changed; reloading it", "change", why)
			todo, news = append(todo, m), append(news, want)
		}
	}
	for _, m := range todo {
		res.Reloaded = append(res.Reloaded, m.name)
	}
	if err := h.reload(ctx, todo, news); err != nil {
		errs = append(errs, err)
	}
	if given {
		h.stanzas = stanzas
	}
	if len(res.Added)+len(res.Removed)+len(res.Reloaded) == 0 {
		h.log.Info("no plugin added, removed or changed")
	}
	return res, errors.Join(errs...)
}

// unchangedSkip reports whether m is a plugin_dir file already skipped as
// no plugin, unchanged on disk since.
func (h *Host) unchangedSkip(m *managed) bool {
	was, ok := h.skipped[m.name]
	if !ok {
		return false
	}
	fi, err := os.Stat(m.path)
	if err != nil || !os.SameFile(fi, was) || fi.Size() != was.Size() || !fi.ModTime().Equal(was.ModTime()) {
		delete(h.skipped, m.name)
		return false
	}
	m.log.Debug("plugin_dir file skipped before and unchanged; not trying it again", "file", m.path)
	return true
}

// startOwner makes inst the first instance of the new plugin m and starts
// its owner goroutine, unless the host is closing: then inst is stopped.
func (h *Host) startOwner(m *managed, inst *instance) error {
	h.lifeMu.Lock()
	defer h.lifeMu.Unlock()
	if h.ctx.Err() != nil {
		inst.kill()
		return fmt.Errorf("start plugin %q: %w", m.name, ErrClosed)
	}
	m.setCurrent(inst)
	h.wg.Add(1)
	go m.run(inst)
	return nil
}

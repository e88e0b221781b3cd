package pluginhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// installFake writes dir/name, a script that runs the test binary as the
// fake scheduler of mode (with extra environment), by write and rename so
// a launch never sees a half-written file.
func installFake(t *testing.T, dir, name, mode string, env ...string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("GORACE=atexit_sleep_ms=0 %s=%s %s exec %q", pluginEnv, mode, strings.Join(env, " "), exe)
	installScript(t, dir, name, body)
}

func installScript(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(dir, ".next-"+name)
	if err := os.WriteFile(tmp, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a log sink the plugins' log goroutines may write to while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every executable in plugin_dir is loaded: a file no stanza names with an
// empty config, and a stray file that is no plugin is skipped with a
// warning. A stanza wins a job type over an unnamed file.
func TestPluginDirLoadsEveryExecutable(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "aaa-named", "a")
	installFake(t, dir, "zzz-unnamed", "b")
	installScript(t, dir, "stray", "echo not a plugin; exit 1")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("docs"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	var logs syncBuffer
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "pluginhost", Output: &logs, Level: hclog.Info})
	cfg.PluginDir, cfg.Stanzas = dir, []Stanza{{Name: "aaa-named"}}
	h := newHost(t, cfg)

	var names []string
	for _, st := range h.Status() {
		names = append(names, st.Name)
	}
	// Unnamed files first, then stanzas: on a job type both serve (fake),
	// the configured plugin wins though its file sorts first.
	if want := []string{"zzz-unnamed", "aaa-named"}; !slices.Equal(names, want) {
		t.Fatalf("plugins = %v, want %v (the stray file and the README skipped)", names, want)
	}
	if info, ok := h.Schedulers().JobType("fake"); !ok || info.Plugin != "aaa-named" {
		t.Errorf("JobType(fake) = %+v, %v; want it served by the stanza's plugin", info, ok)
	}
	if info, ok := h.Schedulers().JobType("fake-b"); !ok || info.Plugin != "zzz-unnamed" {
		t.Errorf("JobType(fake-b) = %+v, %v; want it served by the unnamed plugin", info, ok)
	}
	out := logs.String()
	for _, want := range []string{
		"skipping a file in plugin_dir that is not a drover plugin", filepath.Join(dir, "stray"),
		`plugin loaded: name=zzz-unnamed kind=scheduler version=1 builtin=false path=` + filepath.Join(dir, "zzz-unnamed"),
		`plugin loaded: name=aaa-named kind=scheduler version=1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "README") {
		t.Errorf("a file without an execute bit was tried:\n%s", out)
	}
}

// An unnamed plugin_dir file that hangs in its handshake is skipped after
// the discovery deadline, while the plugins beside it start: it costs the
// agent's start that deadline, not the handshake's minute.
func TestHangingPluginDirFileCostsItsDeadline(t *testing.T) {
	testtier.Slow(t, "waits out a discovery deadline, up to four times longer again on a loaded machine")
	dir := t.TempDir()
	installFake(t, dir, "good", "a")
	installScript(t, dir, "hangs", "exec sleep 600")
	// A script whose child hangs: the child holds the plugin's stdout and
	// stderr, so only killing the plugin's process group ends the launch
	// (before, New waited for the child to exit).
	childPid := filepath.Join(t.TempDir(), "child")
	installScript(t, dir, "hangs-child", fmt.Sprintf("sleep 120 &\necho $! > %s\nwait", childPid))
	// The deadline must leave the good plugin (the race-built test binary
	// re-executed) time to answer its handshake, which on a loaded machine
	// can take longer than 300ms: a run where it did not is tried again
	// with the deadline quadrupled. Every run checks the same things: New
	// waits out the deadline for the hanging files (not less) and not the
	// one-minute handshake bound that applied before.
	var logs *syncBuffer
	var h *Host
	for deadline := 300 * time.Millisecond; ; deadline *= 4 {
		logs = &syncBuffer{}
		cfg := testConfig(t)
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "pluginhost", Output: logs, Level: hclog.Info})
		cfg.PluginDir, cfg.DiscoveryTimeout = dir, deadline
		start := time.Now()
		h = newHost(t, cfg)
		took := time.Since(start)
		if took < deadline {
			t.Errorf("New took %v with a hanging file; it must wait out the %v discovery deadline", took, deadline)
		}
		// The margin is for a loaded machine.
		if took > deadline+30*time.Second {
			t.Errorf("New took %v with a hanging file; want about the %v discovery deadline", took, deadline)
		}
		if len(h.Status()) > 0 || deadline >= 20*time.Second {
			break
		}
		t.Logf("the good plugin missed the %v deadline as well (New took %v); again with a longer one", deadline, took)
		_ = h.Close()
	}
	var names []string
	for _, st := range h.Status() {
		names = append(names, st.Name)
	}
	if !slices.Equal(names, []string{"good"}) {
		t.Fatalf("plugins = %v, want only good (hangs skipped)", names)
	}
	raw, err := os.ReadFile(childPid)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFor(func() bool { return !alive(pid) }); err != nil {
		t.Errorf("the child %d of a skipped plugin_dir file outlives New", pid)
	}
	if out := logs.String(); !strings.Contains(out, "skipping a file in plugin_dir that is not a drover plugin") || !strings.Contains(out, filepath.Join(dir, "hangs")) {
		t.Errorf("log does not say the hanging file was skipped:\n%s", out)
	}
}

// The discovery deadline never exceeds the handshake bound every other
// launch has.
func TestDiscoveryTimeoutNeverAboveStartTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.StartTimeout, cfg.DiscoveryTimeout = 2*time.Second, time.Minute
	h := newHost(t, cfg)
	if h.discoveryTimeout != 2*time.Second {
		t.Errorf("discovery timeout = %v, want it capped at the start timeout 2s", h.discoveryTimeout)
	}
}

// A stanza-named file that fails its handshake fails New (unlike an
// unnamed one).
func TestNamedStrayFailsNew(t *testing.T) {
	dir := t.TempDir()
	installScript(t, dir, "stray", "echo not a plugin; exit 1")
	cfg := testConfig(t)
	cfg.PluginDir, cfg.Stanzas = dir, []Stanza{{Name: "stray"}}
	h, err := New(t.Context(), cfg)
	if err == nil {
		_ = h.Close()
		t.Fatal("New succeeded with a stanza naming a file that is no plugin")
	}
	if !strings.Contains(err.Error(), `launch plugin "stray"`) {
		t.Errorf("error = %v, want it to name the plugin", err)
	}
}

func TestStatusDescribesPlugins(t *testing.T) {
	before := time.Now()
	h := newHost(t, testConfig(t, fake("sched-b", "b")))
	st, err := h.PluginStatus("sched-b")
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	if st.Path != exe || !st.Builtin || st.Version != "1" || !slices.Equal(st.Kinds, []string{shared.KindScheduler}) ||
		st.Health != structs.AgentPluginHealthy || st.Pid == 0 || st.Started.Before(before) || st.Restarts != 0 || st.LastError != "" {
		t.Errorf("status = %+v", st)
	}
	// The fake declares no policies: the status shows the defaults in
	// force (Nomad's service defaults, as neither runs to completion).
	restart, resched := serviceRestart, serviceResched
	want := []JobTypeInfo{
		{Type: "fake", Plugin: "sched-b", MaxAttempts: 5, Behavior: structs.JobTypeBehavior{MaxAttempts: 5, DefaultRestart: &restart, DefaultReschedule: &resched}},
		{Type: "fake-b", Plugin: "sched-b", MaxAttempts: 1, PerNode: true, Behavior: structs.JobTypeBehavior{MaxAttempts: 1, PerNode: true, DefaultRestart: &restart, DefaultReschedule: &resched}},
	}
	if !reflect.DeepEqual(st.JobTypes, want) {
		t.Errorf("job types = %+v, want %+v", st.JobTypes, want)
	}
	if _, err := h.PluginStatus("nope"); !errors.Is(err, ErrUnknownPlugin) || !strings.Contains(err.Error(), "sched-b") {
		t.Errorf("PluginStatus(nope) = %v, want ErrUnknownPlugin listing the plugins", err)
	}
}

// A plugin whose restarts fail reports "failed" with the launch error, and
// "healthy" again once a restart succeeds.
func TestHealthFollowsRestarts(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "ext", "a")
	cfg := testConfig(t)
	cfg.PluginDir, cfg.Stanzas = dir, []Stanza{{Name: "ext"}}
	cfg.CallWait = 0
	h := newHost(t, cfg)
	s, _, err := h.Schedulers().Lookup("only-a")
	if err != nil {
		t.Fatal(err)
	}
	installScript(t, dir, "ext", "echo broken build >&2; exit 1")
	if _, err := s.Schedule(t.Context(), evalReq(evalCrash)); !errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("crash: %v", err)
	}
	if err := waitFor(func() bool {
		st := statusOf(t, h, "ext")
		return st.Health == structs.AgentPluginFailed && strings.Contains(st.LastError, `launch plugin "ext"`)
	}); err != nil {
		t.Fatalf("never failed: %+v", statusOf(t, h, "ext"))
	}
	installFake(t, dir, "ext", "a")
	if err := waitFor(func() bool { return statusOf(t, h, "ext").Health == structs.AgentPluginHealthy }); err != nil {
		t.Fatalf("never healthy again: %+v", statusOf(t, h, "ext"))
	}
	if st := statusOf(t, h, "ext"); st.Restarts != 1 || !st.Running {
		t.Errorf("status = %+v, want 1 restart", st)
	}
}

// ReloadPlugin swaps one plugin: a call held on another plugin neither
// holds it up nor is disturbed.
func TestReloadOnePlugin(t *testing.T) {
	dir := t.TempDir()
	h := newHost(t, testConfig(t, fake("sched-a", "a"), fake("sched-b", "b", dirEnv+"="+dir)))
	pidA, pidB := statusOf(t, h, "sched-a").Pid, statusOf(t, h, "sched-b").Pid
	held := make(chan error, 1)
	go func() {
		held <- Get(h, SchedulerKind).Call(t.Context(), "sched-b", func(ctx context.Context, s scheduler.Scheduler) error {
			_, err := s.Schedule(ctx, evalReq(evalHold))
			return err
		})
	}()
	if err := waitFor(func() bool {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("held-%d", pidB)))
		return err == nil
	}); err != nil {
		t.Fatal("the held call never reached sched-b:", err)
	}

	if err := h.ReloadPlugin(t.Context(), "sched-a"); err != nil {
		t.Fatalf("ReloadPlugin: %v", err)
	}
	a, b := statusOf(t, h, "sched-a"), statusOf(t, h, "sched-b")
	if a.Pid == pidA || a.Restarts != 1 || alive(pidA) {
		t.Errorf("sched-a after its reload: %+v (was pid %d, alive %v)", a, pidA, alive(pidA))
	}
	if b.Pid != pidB || b.Restarts != 0 {
		t.Errorf("sched-b was touched: %+v (was pid %d)", b, pidB)
	}
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Errorf("the call on sched-b: %v", err)
	}
	if err := h.ReloadPlugin(t.Context(), "nope"); !errors.Is(err, ErrUnknownPlugin) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("ReloadPlugin(nope) = %v, want ErrUnknownPlugin naming it", err)
	}
}

// ReloadChanged relaunches only what changed: a binary replaced on disk, or
// a stanza's config or args.
func TestReloadChangedOnly(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "ext", "b")
	installFake(t, dir, "other", "a", baseEnv+"="+baseConfig)
	cfg := testConfig(t, fake("sched-a", "a", baseEnv+"="+baseConfig))
	cfg.PluginDir = dir
	v, w := configBlock(t, `config { greeting = "v" }`), configBlock(t, `config { greeting = "w" }`)
	x := configBlock(t, "config {\n  limit = 2\n}")
	stanzas := []Stanza{{Name: "ext"}, {Name: "other", Config: v}}
	cfg.Stanzas = stanzas
	h := newHost(t, cfg)
	pids := func() map[string]int {
		out := map[string]int{}
		for _, st := range h.Status() {
			out[st.Name] = st.Pid
		}
		return out
	}

	for _, tc := range []struct {
		name    string
		change  func()
		stanzas []Stanza
		want    []string
		wantErr string
	}{
		{name: "nothing changed", stanzas: stanzas},
		{name: "nil stanzas: binaries only"},
		{name: "new binary", change: func() { installFake(t, dir, "ext", "a") }, stanzas: stanzas, want: []string{"ext"}},
		{name: "new config", stanzas: []Stanza{{Name: "ext"}, {Name: "other", Config: w}}, want: []string{"other"}},
		{name: "new args", stanzas: []Stanza{{Name: "ext", Args: []string{"-x"}}, {Name: "other", Config: w}}, want: []string{"ext"}},
		{name: "config of a built-in", stanzas: []Stanza{{Name: "sched-a", Config: x}, {Name: "ext", Args: []string{"-x"}}, {Name: "other", Config: w}}, want: []string{"sched-a"}},
		// other's stanza is gone but its file is not: it stays, as a
		// plugin_dir file with no config. A stanza without a file is an
		// error that stops nothing else.
		{name: "stanza gone, file stays; stanza without file", stanzas: []Stanza{{Name: "sched-a", Config: x}, {Name: "ext", Args: []string{"-x"}}, {Name: "new"}},
			want: []string{"other"}, wantErr: `plugin "new": no executable file "new" in plugin_dir`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.change != nil {
				tc.change()
			}
			before := pids()
			got, err := h.ReloadChanged(t.Context(), tc.stanzas)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !slices.Equal(got.Reloaded, tc.want) || len(got.Added)+len(got.Removed) != 0 {
				t.Errorf("reloaded %+v, want %v only", got, tc.want)
			}
			after := pids()
			for name, pid := range before {
				if changed := after[name] != pid; changed != slices.Contains(tc.want, name) {
					t.Errorf("%s: pid %d → %d", name, pid, after[name])
				}
			}
		})
	}
	if err := Get(h, SchedulerKind).Call(t.Context(), "ext", func(ctx context.Context, s scheduler.Scheduler) error {
		_, err := s.Schedule(ctx, evalReq("after"))
		return err
	}); err != nil {
		t.Errorf("call after the reloads: %v", err)
	}
}

// A Watch call (a driver's task wait) does not hold up a reload: it ends
// with ErrPluginUnavailable when its instance is replaced, and the reload
// returns without waiting out DrainTimeout.
func TestWatchEndsOnReload(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, fake("sched-a", "a", dirEnv+"="+dir))
	cfg.DrainTimeout = 10 * time.Minute
	h := newHost(t, cfg)
	pid := statusOf(t, h, "sched-a").Pid
	watched := make(chan error, 1)
	go func() {
		watched <- Get(h, SchedulerKind).Watch(t.Context(), "sched-a", func(ctx context.Context, s scheduler.Scheduler) error {
			_, err := s.Schedule(ctx, evalReq(evalHold))
			return err
		})
	}()
	if err := waitFor(func() bool {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("held-%d", pid)))
		return err == nil
	}); err != nil {
		t.Fatal("the watched call never reached the plugin:", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := h.ReloadPlugin(ctx, "sched-a"); err != nil {
		t.Fatalf("ReloadPlugin: %v", err)
	}
	if err := <-watched; !errors.Is(err, ErrPluginUnavailable) || !strings.Contains(err.Error(), "replaced") {
		t.Errorf("watched call = %v, want ErrPluginUnavailable saying the instance was replaced", err)
	}
	if alive(pid) {
		t.Errorf("old pid %d alive after the reload", pid)
	}
}

// A declaration is what KindSpec.Init returned at the last launch, kept
// while the plugin is down; Running follows the instance.
func TestInfoAndRunning(t *testing.T) {
	cfg := testConfig(t, fake("sched-a", "a"))
	cfg.CallWait = 0
	cfg.Backoff = Backoff{Initial: time.Hour} // stays down until Reload
	h := newHost(t, cfg)
	name := func(name, kind string) string {
		var got interface{ GetName() string }
		var ok bool
		switch kind {
		case shared.KindScheduler:
			got, ok = Get(h, SchedulerKind).Declaration(name)
		case shared.KindDriver:
			got, ok = Get(h, DriverKind).Declaration(name)
		}
		if !ok {
			return "<none>"
		}
		return got.GetName()
	}
	for _, tc := range []struct{ plugin, kind, want string }{
		{"sched-a", shared.KindScheduler, "fake-a"},
		{"sched-a", shared.KindDriver, "<none>"},
		{"nope", shared.KindScheduler, "<none>"},
	} {
		if got := name(tc.plugin, tc.kind); got != tc.want {
			t.Errorf("Info(%s, %s) = %s, want %s", tc.plugin, tc.kind, got, tc.want)
		}
	}
	if !h.Running("sched-a") || h.Running("nope") {
		t.Errorf("Running(sched-a) = %v, Running(nope) = %v; want true, false", h.Running("sched-a"), h.Running("nope"))
	}
	s, _, err := h.Schedulers().Lookup("fake")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Schedule(t.Context(), evalReq(evalCrash)); !errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("crash: err = %v, want ErrPluginUnavailable", err)
	}
	if err := waitFor(func() bool { return !h.Running("sched-a") }); err != nil {
		t.Fatal("plugin never reported down:", err)
	}
	if got := name("sched-a", shared.KindScheduler); got != "fake-a" {
		t.Errorf("Info while down = %s, want the last instance's fake-a", got)
	}
	if err := h.Reload(t.Context()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if !h.Running("sched-a") {
		t.Error("Running after Reload = false")
	}
}

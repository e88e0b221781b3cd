package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// A reload starts a new stanza's plugin and a new plugin_dir file, and
// routes their job types once they are up; a file that is no plugin is
// skipped with a warning once, not on every reload.
func TestReloadAddsPlugins(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, fake("sched-a", "a"))
	var logs syncBuffer
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "pluginhost", Output: &logs, Level: hclog.Info})
	cfg.PluginDir = dir
	h := newHost(t, cfg)
	set := h.Schedulers()
	var unknown *UnknownJobTypeError
	if _, _, err := set.Lookup("fake-b"); !errors.As(err, &unknown) {
		t.Fatalf("Lookup(fake-b) before the add = %v, want UnknownJobTypeError", err)
	}

	installFake(t, dir, "ext", "b")
	installScript(t, dir, "junk", "echo not a plugin; exit 1")
	res, err := h.ReloadChanged(t.Context(), []Stanza{{Name: "ext"}})
	if err != nil {
		t.Fatalf("ReloadChanged: %v", err)
	}
	if !slices.Equal(res.Added, []string{"ext"}) || len(res.Removed)+len(res.Reloaded) != 0 {
		t.Fatalf("result = %+v, want ext added only", res)
	}
	for typ, want := range map[string]string{"fake-b": "ext", "fake": "ext", "only-a": "sched-a"} {
		s, info, err := set.Lookup(typ)
		if err != nil || info.Plugin != want {
			t.Fatalf("Lookup(%s) = %+v, %v; want it routed to %s", typ, info, err, want)
		}
		resp, err := s.Schedule(t.Context(), evalReq("e-"+typ))
		if err != nil {
			t.Fatalf("Schedule(%s): %v", typ, err)
		}
		if name, pid := servedBy(t, resp); pid != statusOf(t, h, want).Pid {
			t.Errorf("%s served by %s pid %d, want %s's process", typ, name, pid, want)
		}
	}

	// A file no stanza names is added with an empty config.
	installFake(t, dir, "loose", "a")
	res, err = h.ReloadChanged(t.Context(), nil)
	if err != nil || !slices.Equal(res.Added, []string{"loose"}) {
		t.Fatalf("second reload = %+v, %v; want loose added", res, err)
	}
	if st := statusOf(t, h, "loose"); !st.Running || st.Builtin {
		t.Errorf("loose = %+v, want a running third-party plugin", st)
	}
	if got := strings.Count(logs.String(), "skipping a file in plugin_dir that is not a drover plugin"); got != 1 {
		t.Errorf("junk was warned about %d times over two reloads, want once:\n%s", got, logs.String())
	}
	for _, want := range []string{"plugin added: name=ext kind=scheduler", "plugin added: name=loose"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// A new stanza whose launch fails is an error of the reload; the rest of
// the reload (another new plugin, a changed one) still happens.
func TestReloadAddFailureStopsNothingElse(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "old", "a")
	cfg := testConfig(t)
	cfg.PluginDir, cfg.Stanzas = dir, []Stanza{{Name: "old"}}
	h := newHost(t, cfg)
	installScript(t, dir, "broken", "echo broken build >&2; exit 1")
	installFake(t, dir, "good", "b")
	res, err := h.ReloadChanged(t.Context(), []Stanza{{Name: "old", Args: []string{"-v"}}, {Name: "broken"}, {Name: "good"}})
	if err == nil || !strings.Contains(err.Error(), `launch plugin "broken"`) {
		t.Fatalf("err = %v, want the broken plugin's launch failure", err)
	}
	if !slices.Equal(res.Added, []string{"good"}) || !slices.Equal(res.Reloaded, []string{"old"}) {
		t.Errorf("result = %+v, want good added and old reloaded", res)
	}
	if _, err := h.PluginStatus("broken"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("PluginStatus(broken) = %v, want ErrUnknownPlugin", err)
	}
	// Fixed, it is added by the next reload.
	installFake(t, dir, "broken", "a")
	res, err = h.ReloadChanged(t.Context(), []Stanza{{Name: "old", Args: []string{"-v"}}, {Name: "broken"}, {Name: "good"}})
	if err != nil || !slices.Equal(res.Added, []string{"broken"}) || len(res.Reloaded) != 0 {
		t.Errorf("after the fix: %+v, %v; want broken added only", res, err)
	}
}

// Removing a plugin takes it out of routing at once (another plugin that
// declares its type takes over; a type only it served is not served), lets
// its call in flight finish, then stops its process.
func TestReloadRemovesPluginAfterDrain(t *testing.T) {
	dir, meet := t.TempDir(), t.TempDir()
	installFake(t, dir, "ext", "b", dirEnv+"="+meet)
	cfg := testConfig(t, fake("sched-a", "a"))
	cfg.PluginDir, cfg.Stanzas = dir, []Stanza{{Name: "ext"}}
	cfg.DrainTimeout = 10 * time.Minute
	var logs syncBuffer
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "pluginhost", Output: &logs, Level: hclog.Info})
	h := newHost(t, cfg)
	set := h.Schedulers()
	pid := statusOf(t, h, "ext").Pid
	s, info, err := set.Lookup("fake-b")
	if err != nil || info.Plugin != "ext" {
		t.Fatalf("Lookup(fake-b) = %+v, %v", info, err)
	}
	type result struct {
		resp *schedulerpb.ScheduleResponse
		err  error
	}
	held := make(chan result, 1)
	go func() {
		resp, err := s.Schedule(t.Context(), evalReq(evalHold))
		held <- result{resp, err}
	}()
	if err := waitFor(func() bool {
		_, err := os.Stat(filepath.Join(meet, fmt.Sprintf("held-%d", pid)))
		return err == nil
	}); err != nil {
		t.Fatal("the held call never reached ext:", err)
	}

	if err := os.Remove(filepath.Join(dir, "ext")); err != nil {
		t.Fatal(err)
	}
	type reloaded struct {
		res ReloadResult
		err error
	}
	done := make(chan reloaded, 1)
	go func() {
		res, err := h.ReloadChanged(t.Context(), []Stanza{})
		done <- reloaded{res, err}
	}()
	var unknown *UnknownJobTypeError
	if err := waitFor(func() bool {
		_, _, err := set.Lookup("fake-b")
		return errors.As(err, &unknown)
	}); err != nil {
		t.Fatal("fake-b still routed after the remove began:", err)
	}
	if _, info, err := set.Lookup("fake"); err != nil || info.Plugin != "sched-a" {
		t.Errorf("Lookup(fake) = %+v, %v; want sched-a to take it over at once", info, err)
	}
	if !alive(pid) {
		t.Fatal("ext was stopped with a call in flight")
	}
	// A handle taken before the remove reaches no plugin now.
	if _, err := s.Schedule(t.Context(), evalReq("late")); !errors.Is(err, ErrPluginUnavailable) {
		t.Errorf("call on a removed plugin = %v, want ErrPluginUnavailable", err)
	}
	select {
	case r := <-done:
		t.Fatalf("the reload returned before the drain: %+v, %v", r.res, r.err)
	default:
	}
	if err := os.WriteFile(filepath.Join(meet, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := <-held; r.err != nil {
		t.Fatalf("the held call failed: %v", r.err)
	} else if _, got := servedBy(t, r.resp); got != pid {
		t.Errorf("held call served by pid %d, want ext's %d", got, pid)
	}
	r := <-done
	if r.err != nil || !slices.Equal(r.res.Removed, []string{"ext"}) || len(r.res.Added)+len(r.res.Reloaded) != 0 {
		t.Fatalf("reload = %+v, %v; want ext removed only", r.res, r.err)
	}
	if alive(pid) {
		t.Errorf("ext's pid %d alive after the reload returned", pid)
	}
	if _, err := h.PluginStatus("ext"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("PluginStatus(ext) = %v, want ErrUnknownPlugin", err)
	}
	if err := h.ReloadPlugin(t.Context(), "ext"); !errors.Is(err, ErrUnknownPlugin) {
		t.Errorf("ReloadPlugin(ext) = %v, want ErrUnknownPlugin", err)
	}
	if !strings.Contains(logs.String(), "plugin removed: name=ext") {
		t.Errorf("log lacks the removal:\n%s", logs.String())
	}
	// Built-ins are never removed, whatever the stanzas say.
	if st := statusOf(t, h, "sched-a"); !st.Running {
		t.Errorf("sched-a = %+v", st)
	}
}

// Lookups, calls and Status from many goroutines while plugins come and
// go (run with -race): every call either succeeds or says the type is not
// served or its plugin unavailable, never anything else.
func TestConcurrentCallsDuringAddRemove(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, fake("sched-a", "a"))
	cfg.PluginDir = dir
	cfg.CallWait = 0
	h := newHost(t, cfg)
	set := h.Schedulers()

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var ok, notServed, unavail atomic.Int64
	errc := make(chan error, 8)
	for i := range 4 {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				typ := []string{"fake-b", "fake", "only-a"}[n%3]
				s, _, err := set.Lookup(typ)
				if err == nil {
					_, err = s.Schedule(ctx, evalReq(fmt.Sprintf("c%d-%d", i, n)))
				}
				var unknown *UnknownJobTypeError
				switch {
				case err == nil:
					ok.Add(1)
				case errors.As(err, &unknown):
					notServed.Add(1)
				case errors.Is(err, ErrPluginUnavailable):
					unavail.Add(1)
				case ctx.Err() != nil:
				default:
					errc <- fmt.Errorf("%s: %w", typ, err)
					return
				}
				_ = h.Status()
				_ = h.Drivers().Names()
				_ = set.ServedTypes()
			}
		})
	}
	for round := range 3 {
		installFake(t, dir, "ext", "b")
		if res, err := h.ReloadChanged(t.Context(), nil); err != nil || !slices.Equal(res.Added, []string{"ext"}) {
			t.Fatalf("round %d add: %+v, %v", round, res, err)
		}
		if err := os.Remove(filepath.Join(dir, "ext")); err != nil {
			t.Fatal(err)
		}
		if res, err := h.ReloadChanged(t.Context(), nil); err != nil || !slices.Equal(res.Removed, []string{"ext"}) {
			t.Fatalf("round %d remove: %+v, %v", round, res, err)
		}
	}
	cancel()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("unexpected call error: %v", err)
	}
	if ok.Load() == 0 || notServed.Load() == 0 {
		t.Errorf("calls: %d ok, %d not served, %d unavailable; want some of the first two", ok.Load(), notServed.Load(), unavail.Load())
	}
	t.Logf("calls: %d ok, %d not served, %d unavailable", ok.Load(), notServed.Load(), unavail.Load())
}

// Close does not wait out the drain of a plugin being removed: the reload
// returns, the process is stopped, and no goroutine is left (TestMain's
// goleak check).
func TestCloseDuringRemovalDrain(t *testing.T) {
	dir, meet := t.TempDir(), t.TempDir()
	installFake(t, dir, "ext", "b", dirEnv+"="+meet)
	cfg := testConfig(t, fake("sched-a", "a"))
	cfg.PluginDir, cfg.Stanzas = dir, []Stanza{{Name: "ext"}}
	cfg.DrainTimeout = 10 * time.Minute
	h, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	pid := statusOf(t, h, "ext").Pid
	s, _, err := h.Schedulers().Lookup("fake-b")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() {
		_, err := s.Schedule(t.Context(), evalReq(evalHold))
		held <- err
	}()
	if err := waitFor(func() bool {
		_, err := os.Stat(filepath.Join(meet, fmt.Sprintf("held-%d", pid)))
		return err == nil
	}); err != nil {
		t.Fatal("the held call never reached ext:", err)
	}
	if err := os.Remove(filepath.Join(dir, "ext")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.ReloadChanged(t.Context(), []Stanza{})
		done <- err
	}()
	var unknown *UnknownJobTypeError
	if err := waitFor(func() bool {
		_, _, err := h.Schedulers().Lookup("fake-b")
		return errors.As(err, &unknown)
	}); err != nil {
		t.Fatal("ext never left routing:", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- h.Close() }()
	for what, c := range map[string]chan error{"Close": closed, "the reload": done} {
		select {
		case <-c:
		case <-time.After(time.Minute):
			t.Fatalf("%s did not return while a removal drained", what)
		}
	}
	if err := <-held; !errors.Is(err, ErrPluginUnavailable) {
		t.Errorf("the held call = %v, want ErrPluginUnavailable (its process was stopped by Close)", err)
	}
	if err := waitFor(func() bool { return !alive(pid) }); err != nil {
		t.Errorf("ext's pid %d alive after Close", pid)
	}
}

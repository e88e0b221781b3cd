package pluginhost

import (
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
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/shared"
)

func testConfig(t *testing.T, builtins ...Builtin) Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Logger:   hclog.New(&hclog.LoggerOptions{Name: "pluginhost", Output: t.Output(), Level: hclog.Info}),
		SelfExe:  exe,
		Builtins: builtins,
		CallWait: 20 * time.Second,
		Backoff:  Backoff{Initial: 10 * time.Millisecond},
	}
}

// fake is a built-in scheduler run by re-executing the test binary.
func fake(name, mode string, env ...string) Builtin {
	return Builtin{Name: name, Kind: shared.KindScheduler, Env: append(fakeEnv(mode), env...)}
}

// fakeEnv makes the re-executed test binary a fake plugin. Under -race a Go
// process sleeps 1 s at exit by default; the tests kill many plugins.
func fakeEnv(mode string) []string {
	return []string{pluginEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"}
}

func newHost(t *testing.T, cfg Config) *Host {
	t.Helper()
	h, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func statusOf(t *testing.T, h *Host, name string) PluginStatus {
	t.Helper()
	for _, st := range h.Status() {
		if st.Name == name {
			return st
		}
	}
	t.Fatalf("no plugin %q in Status", name)
	return PluginStatus{}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestLookupRoutesJobTypes(t *testing.T) {
	h := newHost(t, testConfig(t, fake("sched-a", "a"), fake("sched-b", "b")))
	set := h.Schedulers()

	if got, want := set.ServedTypes(), []string{"fake", "fake-b", "only-a"}; !slices.Equal(got, want) {
		t.Errorf("ServedTypes = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		typ      string
		plugin   string
		attempts int
		perNode  bool
	}{
		{"fake", "sched-b", 5, false}, // served by both: the later one wins
		{"fake-b", "sched-b", 1, true},
		{"only-a", "sched-a", 2, false},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			s, info, err := set.Lookup(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			// The fakes declare no policies: Nomad's service defaults fill them.
			restart, resched := serviceRestart, serviceResched
			want := JobTypeInfo{Type: tc.typ, Plugin: tc.plugin, MaxAttempts: tc.attempts, PerNode: tc.perNode,
				Behavior: structs.JobTypeBehavior{MaxAttempts: tc.attempts, PerNode: tc.perNode, DefaultRestart: &restart, DefaultReschedule: &resched}}
			if !reflect.DeepEqual(info, want) {
				t.Errorf("info = %+v, want %+v", info, want)
			}
			if got, ok := set.JobType(tc.typ); !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("JobType = %+v, %v; want %+v", got, ok, want)
			}
			resp, err := s.Schedule(t.Context(), evalReq("e1"))
			if err != nil {
				t.Fatal(err)
			}
			name, pid := servedBy(t, resp)
			if wantName := "fake-" + strings.TrimPrefix(tc.plugin, "sched-"); name != wantName {
				t.Errorf("served by %q, want %q", name, wantName)
			}
			if want := statusOf(t, h, tc.plugin).Pid; pid != want {
				t.Errorf("served by pid %d, want the plugin's pid %d", pid, want)
			}
			pinfo, err := s.Info(t.Context())
			if err != nil || pinfo.GetName() != name {
				t.Errorf("Info = %v, %v; want name %q", pinfo, err, name)
			}
		})
	}

	_, _, err := set.Lookup("service")
	var unknown *UnknownJobTypeError
	if !errors.As(err, &unknown) || unknown.Type != "service" {
		t.Fatalf("Lookup(service) error = %v, want *UnknownJobTypeError", err)
	}
	const want = `job type "service" is not served by any scheduler plugin (served: fake, fake-b, only-a)`
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// connPlugin is a test kind whose interface is the raw connection.
type connPlugin struct{ plugin.NetRPCUnsupportedPlugin }

func (connPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error { return errors.New("host only") }
func (connPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return c, nil
}

func TestThirdPartyPluginsAndKinds(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A third-party binary: a script that records its arguments and runs the
	// test binary as fake scheduler "b".
	script := fmt.Sprintf("#!/bin/sh\necho \"$@\" > %q\nGORACE=atexit_sleep_ms=0 exec env %s=b %q \"$@\"\n",
		filepath.Join(dir, "args"), pluginEnv, exe)
	if err := os.WriteFile(filepath.Join(dir, "gpu"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	cfg := testConfig(t, Builtin{Name: "probe-builtin", Kind: "probe", Env: fakeEnv("a")})
	cfg.PluginDir = dir
	cfg.Stanzas = []Stanza{
		{Name: "probe-builtin"},
		{Name: "gpu", Args: []string{"--flag", "value"}},
	}
	// Served by every plugin: go-plugin registers the health service.
	probe := NewKind(KindSpec[*grpc.ClientConn, string]{Name: "probe", Plugin: connPlugin{},
		Init: func(ctx context.Context, conn *grpc.ClientConn) (string, error) {
			_, err := grpc_health_v1.NewHealthClient(conn).Check(ctx,
				&grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
			return "probed", err
		}})
	// Served by none: the RPC is Unimplemented, so discovery skips it.
	nope := NewKind(KindSpec[*grpc.ClientConn, string]{Name: "nope", Plugin: connPlugin{},
		Init: func(ctx context.Context, conn *grpc.ClientConn) (string, error) {
			return "", conn.Invoke(ctx, "/drover.test.Nope/Ping", &emptypb.Empty{}, &emptypb.Empty{})
		}})
	cfg.Kinds = []Kind{probe.Kind(), nope.Kind()}
	h := newHost(t, cfg)

	for _, tc := range []struct {
		name    string
		builtin bool
		kinds   []string
	}{
		{"probe-builtin", true, []string{"probe"}},
		{"gpu", false, []string{"probe", "scheduler"}},
	} {
		st := statusOf(t, h, tc.name)
		if st.Builtin != tc.builtin || !slices.Equal(st.Kinds, tc.kinds) || !st.Running || st.Pid == 0 {
			t.Errorf("Status(%s) = %+v, want builtin=%v kinds=%v running", tc.name, st, tc.builtin, tc.kinds)
		}
	}
	for kind, want := range map[string][]string{
		"probe": {"probe-builtin", "gpu"}, "scheduler": {"gpu"}, "nope": nil,
	} {
		if got := h.Plugins(kind); !slices.Equal(got, want) {
			t.Errorf("Plugins(%s) = %v, want %v", kind, got, want)
		}
	}
	if _, info, err := h.Schedulers().Lookup("fake-b"); err != nil || info.Plugin != "gpu" {
		t.Errorf("Lookup(fake-b) = %+v, %v; want plugin gpu", info, err)
	}
	if args, err := os.ReadFile(filepath.Join(dir, "args")); err != nil || string(args) != "--flag value\n" {
		t.Errorf("third-party args = %q, %v; want %q", args, err, "--flag value\n")
	}

	// Typed access: Call, Dispense and the declaration by plugin name.
	probes := Get(h, probe)
	err = probes.Call(t.Context(), "gpu", func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := grpc_health_v1.NewHealthClient(conn).Check(ctx,
			&grpc_health_v1.HealthCheckRequest{Service: plugin.GRPCServiceName})
		return err
	})
	if err != nil {
		t.Errorf("Call(gpu, probe): %v", err)
	}
	conn, release, err := probes.Dispense(t.Context(), "probe-builtin")
	if err != nil {
		t.Fatalf("Dispense: %v", err)
	}
	if conn == nil {
		t.Error("Dispense returned no connection")
	}
	release()
	if decl, ok := probes.Declaration("gpu"); !ok || decl != "probed" {
		t.Errorf("Declaration(gpu) = %q, %v; want probed", decl, ok)
	}
	if got := probes.Loaded(); len(got) != 2 || got[0].Name != "probe-builtin" || !got[0].Builtin || got[1].Name != "gpu" || got[1].Builtin {
		t.Errorf("Loaded() = %+v, want probe-builtin (built-in), then gpu", got)
	}
	for _, tc := range []struct {
		name     string
		dispense func() error
	}{
		{"gpu/nope", func() error { _, _, err := Get(h, nope).Dispense(t.Context(), "gpu"); return err }},
		{"probe-builtin/scheduler", func() error { _, _, err := Get(h, SchedulerKind).Dispense(t.Context(), "probe-builtin"); return err }},
		{"missing/probe", func() error { _, _, err := probes.Dispense(t.Context(), "missing"); return err }},
	} {
		if err := tc.dispense(); !errors.Is(err, ErrUnknownPlugin) {
			t.Errorf("Dispense(%s) error = %v, want ErrUnknownPlugin", tc.name, err)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"missing binary", func(c *Config) {
			c.PluginDir, c.Stanzas = t.TempDir(), []Stanza{{Name: "ghost"}}
		}, `plugin "ghost": no executable file "ghost" in plugin_dir`},
		{"stanza names no file", func(c *Config) {
			c.PluginDir = t.TempDir()
			for _, f := range []string{"drover-scheduler-gpu", "notes.txt"} {
				mode := os.FileMode(0o755)
				if f == "notes.txt" {
					mode = 0o644 // not executable: not a candidate, not listed
				}
				if err := os.WriteFile(filepath.Join(c.PluginDir, f), []byte("#!/bin/sh\nexit 1\n"), mode); err != nil {
					t.Fatal(err)
				}
			}
			c.Stanzas = []Stanza{{Name: "gpu"}}
		}, `(it holds: drover-scheduler-gpu); a plugin stanza's name is the file name of its binary in plugin_dir, or the name of a built-in (ok)`},
		{"missing plugin_dir", func(c *Config) {
			c.PluginDir = filepath.Join(t.TempDir(), "nope")
		}, "plugin_dir: open "},
		{"scheduler without job types", func(c *Config) {
			c.Builtins = append(c.Builtins, fake("empty", "empty"))
		}, "at least one job type"},
		{"unknown kind", func(c *Config) {
			c.Builtins = append(c.Builtins, Builtin{Name: "x", Kind: "gpu"})
		}, `unknown kind "gpu"`},
		{"duplicate name", func(c *Config) {
			c.Builtins = append(c.Builtins, fake("ok", "a"))
		}, `"ok" is defined twice`},
		{"duplicate stanza", func(c *Config) {
			c.PluginDir, c.Stanzas = t.TempDir(), []Stanza{{Name: "s"}, {Name: "s"}}
		}, `"s" is configured twice`},
		{"no plugin_dir", func(c *Config) { c.Stanzas = []Stanza{{Name: "s"}} }, "needs plugin_dir"},
		{"path in name", func(c *Config) {
			c.PluginDir, c.Stanzas = t.TempDir(), []Stanza{{Name: "../s"}}
		}, "invalid plugin name"},
		{"reserved kind", func(c *Config) {
			c.Kinds = []Kind{NewKind(KindSpec[*grpc.ClientConn, string]{Name: shared.KindScheduler, Plugin: connPlugin{}}).Kind()}
		}, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, fake("ok", "a"))
			tc.modify(&cfg)
			h, err := New(t.Context(), cfg)
			if err == nil {
				_ = h.Close()
				t.Fatal("New succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q, want it to contain %q", err, tc.want)
			}
			// The plugin that did launch must not outlive the failure.
			goleak.VerifyNone(t)
		})
	}
}

func TestCrashMidCallRestarts(t *testing.T) {
	h := newHost(t, testConfig(t, fake("sched-a", "a")))
	s, _, err := h.Schedulers().Lookup("only-a")
	if err != nil {
		t.Fatal(err)
	}
	pid1 := statusOf(t, h, "sched-a").Pid

	if _, err := s.Schedule(t.Context(), evalReq(evalCrash)); !errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("Schedule on a crashing plugin: err = %v, want ErrPluginUnavailable", err)
	}
	// The same handle works again once the owner has restarted the plugin;
	// the call waits for it (CallWait) rather than failing.
	resp, err := s.Schedule(t.Context(), evalReq("after"))
	if err != nil {
		t.Fatalf("Schedule after restart: %v", err)
	}
	if _, pid2 := servedBy(t, resp); pid2 == pid1 {
		t.Errorf("served by the crashed pid %d", pid1)
	}
	st := statusOf(t, h, "sched-a")
	if st.Restarts != 1 || !st.Running || !strings.Contains(st.LastError, fmt.Sprint(pid1)) {
		t.Errorf("Status = %+v, want 1 restart, running, last error naming pid %d", st, pid1)
	}
	if err := waitFor(func() bool { return !alive(pid1) }); err != nil {
		t.Errorf("crashed pid %d: %v", pid1, err)
	}
}

func TestDownPluginFailsFastAndReloadRevives(t *testing.T) {
	cfg := testConfig(t, fake("sched-a", "a"))
	cfg.CallWait = 0
	cfg.Backoff = Backoff{Initial: time.Hour} // stays down until Reload
	h := newHost(t, cfg)
	s, _, err := h.Schedulers().Lookup("fake")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Schedule(t.Context(), evalReq(evalCrash)); !errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("crash: err = %v, want ErrPluginUnavailable", err)
	}
	if err := waitFor(func() bool { return !statusOf(t, h, "sched-a").Running }); err != nil {
		t.Fatal("plugin never reported down:", err)
	}
	start := time.Now()
	if _, err := s.Schedule(t.Context(), evalReq("down")); !errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("call while down: err = %v, want ErrPluginUnavailable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("call while down took %s; with CallWait 0 it must fail at once", d)
	}
	// Routes survive the outage: the type is still known, and Lookup says
	// at once, in the one kind callers outside the host know, that its
	// plugin is unavailable rather than that the type is unknown.
	_, info, err := h.Schedulers().Lookup("fake")
	var unknown *UnknownJobTypeError
	if !errors.Is(err, structs.ErrUnavailable) || !errors.Is(err, ErrPluginUnavailable) || errors.As(err, &unknown) || info.Plugin != "sched-a" {
		t.Errorf("Lookup while down = %+v, %v; want sched-a's info and an ErrUnavailable error", info, err)
	}

	if err := h.Reload(t.Context()); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if _, err := s.Schedule(t.Context(), evalReq("revived")); err != nil {
		t.Fatalf("call after Reload: %v", err)
	}
	fresh, _, err := h.Schedulers().Lookup("fake")
	if err != nil {
		t.Fatalf("Lookup after Reload: %v", err)
	}
	if _, err := fresh.Schedule(t.Context(), evalReq("revived-lookup")); err != nil {
		t.Fatalf("call through a Lookup after Reload: %v", err)
	}
}

func TestCallWaitEndsWithCallerContext(t *testing.T) {
	cfg := testConfig(t, fake("sched-a", "a"))
	cfg.Backoff = Backoff{Initial: time.Hour}
	h := newHost(t, cfg)
	s, _, _ := h.Schedulers().Lookup("fake")
	if _, err := s.Schedule(t.Context(), evalReq(evalCrash)); !errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("crash: err = %v, want ErrPluginUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Schedule(ctx, evalReq("waits"))
	if !errors.Is(err, ErrPluginUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrPluginUnavailable and DeadlineExceeded", err)
	}
}

func TestReloadUnderLoadDropsNothing(t *testing.T) {
	h := newHost(t, testConfig(t, fake("sched-a", "a"), fake("sched-b", "b")))
	before := map[string]int{"sched-a": statusOf(t, h, "sched-a").Pid, "sched-b": statusOf(t, h, "sched-b").Pid}
	set := h.Schedulers()

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int]int{} // pid → calls served
	var failures []error
	for i := range 4 {
		wg.Go(func() {
			typ := []string{"fake", "only-a"}[i%2] // one type per plugin
			for ctx.Err() == nil {
				err := call(set, typ, func(pid int) {
					mu.Lock()
					seen[pid]++
					mu.Unlock()
				})
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}
		})
	}
	for range 2 {
		if err := h.Reload(t.Context()); err != nil {
			t.Errorf("Reload: %v", err)
		}
	}
	// Keep the load on until the newest processes have served calls too.
	after := map[string]int{"sched-a": statusOf(t, h, "sched-a").Pid, "sched-b": statusOf(t, h, "sched-b").Pid}
	err := waitFor(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[after["sched-a"]] > 0 && seen[after["sched-b"]] > 0
	})
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("new instances never served: %v (seen %v)", err, seen)
	}
	if len(failures) > 0 {
		t.Fatalf("%d calls failed during Reload, first: %v", len(failures), failures[0])
	}
	for name, pid := range before {
		if after[name] == pid {
			t.Errorf("%s: still pid %d after Reload", name, pid)
		}
		if alive(pid) {
			t.Errorf("%s: old pid %d still alive after Reload returned", name, pid)
		}
	}
}

// call schedules one eval of type typ and reports the serving pid. The
// eval runs under a fresh context: stopping the load must not cancel a call
// in flight, which would count as a failure.
func call(set *SchedulerSet, typ string, served func(pid int)) error {
	s, _, err := set.Lookup(typ)
	if err != nil {
		return err
	}
	resp, err := s.Schedule(context.Background(), evalReq("load"))
	if err != nil {
		return err
	}
	_, pid, ok := strings.Cut(resp.GetStatusDescription(), " ")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil {
		return fmt.Errorf("unexpected answer %q", resp.GetStatusDescription())
	}
	served(n)
	return nil
}

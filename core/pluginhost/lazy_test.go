package pluginhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// lazyFake is fake(name, mode) started when first needed, declared in
// process as the fake of mode "a" declares itself.
func lazyFake(name, mode string, env ...string) Builtin {
	b := fake(name, mode, env...)
	b.Lazy = true
	b.Declare = func(context.Context) (any, error) {
		return &schedulerpb.InfoResponse{Name: "fake-a", Version: "1", JobTypes: []*schedulerpb.JobTypeInfo{
			{Name: "fake", MaxAttempts: 3}, {Name: "only-a", MaxAttempts: 2}}}, nil
	}
	return b
}

func schedule(h *Host, typ string) (*schedulerpb.ScheduleResponse, error) {
	s, _, err := h.Schedulers().Lookup(typ)
	if err != nil {
		return nil, err
	}
	return s.Schedule(context.Background(), evalReq("lazy"))
}

// A lazy plugin runs no process until its first call, yet is listed (idle)
// and routed from the start; concurrent first calls start it once.
func TestLazySchedulerStartsOnFirstCall(t *testing.T) {
	h := newHost(t, testConfig(t, lazyFake("sched-lazy", "a"), fake("sched-eager", "b")))

	st := statusOf(t, h, "sched-lazy")
	if !st.Idle || st.Running || st.Pid != 0 || st.Health != structs.AgentPluginIdle || st.HealthDescription == "" {
		t.Fatalf("lazy plugin after New: %+v, want idle without a process", st)
	}
	if len(st.JobTypes) != 2 || st.Version != "1" || strings.Join(st.Kinds, ",") != SchedulerKind.Name() {
		t.Fatalf("idle plugin lists %+v, want its in-process declaration", st)
	}
	if eager := statusOf(t, h, "sched-eager"); !eager.Running || eager.Idle {
		t.Fatalf("eager plugin after New: %+v", eager)
	}
	if info, ok := h.Schedulers().JobType("only-a"); !ok || info.Plugin != "sched-lazy" || info.MaxAttempts != 2 {
		t.Fatalf("only-a routed to %+v (%v), want the idle plugin's declaration", info, ok)
	}

	var wg sync.WaitGroup
	pids := make([]int, 4)
	errs := make([]error, 4)
	for i := range pids {
		wg.Go(func() {
			resp, err := schedule(h, "only-a")
			if errs[i] = err; err == nil {
				_, pids[i] = servedBy(t, resp)
			}
		})
	}
	wg.Wait()
	for i := range pids {
		if errs[i] != nil {
			t.Fatalf("first call %d: %v", i, errs[i])
		}
		if pids[i] != pids[0] {
			t.Fatalf("first calls served by pids %v: one start expected", pids)
		}
	}
	st = statusOf(t, h, "sched-lazy")
	if st.Idle || !st.Running || st.Pid != pids[0] || st.Health != structs.AgentPluginHealthy || st.Restarts != 0 {
		t.Fatalf("lazy plugin after its first call: %+v, want running as pid %d", st, pids[0])
	}
	if !alive(pids[0]) {
		t.Fatalf("pid %d is not alive", pids[0])
	}
}

// A lazy start that fails fails the call that needed it with
// ErrPluginUnavailable (kind structs.ErrUnavailable) and the launch's
// error; the plugin stays listed, failed; a call before the backoff is
// over fails at once without a launch, and the next need after it starts
// the plugin.
func TestLazyStartFailureSurfacedAndRetried(t *testing.T) {
	dir := t.TempDir()
	mode := filepath.Join(dir, "mode")
	if err := os.WriteFile(mode, []byte("empty"), 0o600); err != nil { // Info without job types: Init fails
		t.Fatal(err)
	}
	cfg := testConfig(t, lazyFake("sched-lazy", modeFile, dirEnv+"="+dir))
	cfg.Backoff = Backoff{Initial: 300 * time.Millisecond} // the retry is refused first
	h := newHost(t, cfg)

	_, err := schedule(h, "fake")
	if !errors.Is(err, ErrPluginUnavailable) || !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("first call with a failing start: %v, want ErrPluginUnavailable", err)
	}
	if !strings.Contains(err.Error(), "at least one job type") {
		t.Fatalf("the error %q does not say why the start failed", err)
	}
	st := statusOf(t, h, "sched-lazy")
	if !st.Idle || st.Running || st.Health != structs.AgentPluginFailed || !strings.Contains(st.LastError, "at least one job type") {
		t.Fatalf("after a failed start: %+v, want idle, failed, with the error", st)
	}
	if _, err := schedule(h, "fake"); !errors.Is(err, ErrPluginUnavailable) {
		t.Fatalf("a call within the backoff: %v, want ErrPluginUnavailable at once", err)
	}

	if err := os.WriteFile(mode, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(func() bool { return h.Available("sched-lazy") }); err != nil {
		t.Fatal("the failed plugin never became available for a retry")
	}
	resp, err := schedule(h, "fake")
	if err != nil {
		t.Fatalf("the call after the backoff: %v", err)
	}
	if name, pid := servedBy(t, resp); name != "fake-a" || pid != statusOf(t, h, "sched-lazy").Pid {
		t.Fatalf("served by %s %d, status %+v", name, pid, statusOf(t, h, "sched-lazy"))
	}
	if st := statusOf(t, h, "sched-lazy"); st.Health != structs.AgentPluginHealthy || st.Idle {
		t.Fatalf("after the retry: %+v", st)
	}
}

// A reload leaves an idle plugin idle (no process to replace); once it
// runs, a reload relaunches it as any plugin. Start starts it on demand.
func TestLazyPluginAndReload(t *testing.T) {
	h := newHost(t, testConfig(t, lazyFake("sched-lazy", "a"), fake("sched-eager", "b")))
	eager := statusOf(t, h, "sched-eager").Pid

	if err := h.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.ReloadPlugin(t.Context(), "sched-lazy"); err != nil {
		t.Fatal(err)
	}
	res, err := h.ReloadChanged(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Reloaded)+len(res.Added)+len(res.Removed) != 0 {
		t.Fatalf("ReloadChanged with nothing changed did %+v", res)
	}
	if st := statusOf(t, h, "sched-lazy"); !st.Idle || st.Pid != 0 {
		t.Fatalf("after reloads the idle plugin is %+v, want still idle", st)
	}
	if st := statusOf(t, h, "sched-eager"); st.Pid == eager || !st.Running {
		t.Fatalf("Reload did not relaunch the running plugin: %+v (was pid %d)", st, eager)
	}

	if err := h.Start(t.Context(), "sched-lazy"); err != nil {
		t.Fatal(err)
	}
	first := statusOf(t, h, "sched-lazy")
	if !first.Running || first.Idle {
		t.Fatalf("after Start: %+v", first)
	}
	if err := h.ReloadPlugin(t.Context(), "sched-lazy"); err != nil {
		t.Fatal(err)
	}
	if st := statusOf(t, h, "sched-lazy"); !st.Running || st.Pid == first.Pid || st.Restarts != 1 {
		t.Fatalf("reload of the started plugin: %+v (was pid %d)", st, first.Pid)
	}
	if err := h.Start(t.Context(), "nope"); !errors.Is(err, ErrUnknownPlugin) {
		t.Fatalf("Start of an unknown plugin: %v", err)
	}
}

// A lazy built-in with a config block launches at New: its config is
// checked at start. A declaration of the wrong type launches it too.
func TestLazyPluginWithConfigOrBadDeclarationStartsAtNew(t *testing.T) {
	withConfig := lazyFake("sched-cfg", "a", baseEnv+"="+baseConfig)
	badDecl := lazyFake("sched-bad", "b")
	badDecl.Declare = func(context.Context) (any, error) { return "not an Info", nil }
	cfg := testConfig(t, withConfig, badDecl)
	cfg.Stanzas = []Stanza{{Name: "sched-cfg", Config: configBlock(t, "config {\n  limit = 7\n}\n")}}
	h := newHost(t, cfg)
	for _, name := range []string{"sched-cfg", "sched-bad"} {
		if st := statusOf(t, h, name); !st.Running || st.Idle {
			t.Errorf("%s after New: %+v, want running", name, st)
		}
	}
}

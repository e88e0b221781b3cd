package rawexec

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/shared"
)

// TestOverGRPC drives the whole task lifecycle through the plugin's gRPC
// glue, as the client agent does, including error kinds across the wire.
func TestOverGRPC(t *testing.T) {
	ctx := testCtx(t)
	d := drivertest.Connect(t, newTestDriver())

	info, err := d.Info(ctx)
	if err != nil || info.GetName() != Name {
		t.Fatalf("Info = %v, %v", info, err)
	}
	fp, err := d.Fingerprint(ctx)
	if err != nil || !fp.GetHealthy() || fp.GetAttributes()[AttrDriver] != "1" {
		t.Fatalf("Fingerprint = %v, %v", fp, err)
	}

	bad := newTaskConfig(t, "alloc-1/bad", "no-such-command-xyz")
	if _, err := d.StartTask(ctx, bad); !errors.Is(err, driver.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), `"no-such-command-xyz"`) {
		t.Fatalf("StartTask(unknown command) = %v", err)
	}
	if _, err := d.InspectTask(ctx, "alloc-1/nope"); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("InspectTask(unknown) = %v", err)
	}

	exits := newTaskConfig(t, "alloc-1/exits", "/bin/sh", "-c", "echo hi; exit 3")
	start(t, d, exits)
	if res := awaitExit(t, d, exits.GetId()); res.GetExitCode() != 3 {
		t.Fatalf("exit = %v", res)
	}
	if got := readFile(t, exits.GetStdoutPath()); got != "hi\n" {
		t.Fatalf("stdout = %q", got)
	}

	sleeper := newTaskConfig(t, "alloc-1/sleeper", "sleep", "60")
	start(t, d, sleeper)
	if _, err := d.StartTask(ctx, sleeper); !errors.Is(err, driver.ErrTaskExists) {
		t.Fatalf("duplicate StartTask = %v", err)
	}
	if err := d.DestroyTask(ctx, sleeper.GetId(), false); !errors.Is(err, driver.ErrTaskRunning) {
		t.Fatalf("DestroyTask(running) = %v", err)
	}
	if err := d.SignalTask(ctx, sleeper.GetId(), "SIGNOPE"); !errors.Is(err, driver.ErrInvalidSignal) {
		t.Fatalf("SignalTask(bad) = %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.WaitTask(cancelled, sleeper.GetId()); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitTask(cancelled) = %v", err)
	}
	if err := d.StopTask(ctx, sleeper.GetId(), testTimeout, ""); err != nil {
		t.Fatal(err)
	}
	st, err := d.InspectTask(ctx, sleeper.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_EXITED || st.GetExitResult().GetSignal() != 15 {
		t.Fatalf("InspectTask after stop = %v, %v", st, err)
	}
	if err := d.SignalTask(ctx, sleeper.GetId(), "SIGHUP"); !errors.Is(err, driver.ErrTaskNotRunning) {
		t.Fatalf("SignalTask(exited) = %v", err)
	}

	// Recovery through a second plugin connection.
	gated, gate := gatedTask(t, "alloc-1/gated")
	h := start(t, d, gated)
	other := drivertest.Connect(t, newTestDriver())
	if err := other.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.DestroyTask(context.Background(), h.GetId(), true) })
	openGate(t, gate)
	if res := awaitExit(t, other, h.GetId()); res.GetExitCode() != 42 {
		t.Fatalf("recovered exit = %v", res)
	}
}

// pluginProcess runs the driver as a real plugin process (this test binary
// serving it), as the client agent does.
type pluginProcess struct {
	client *plugin.Client
	driver driver.Driver
	pid    int
}

func startPluginProcess(t *testing.T) *pluginProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnvVar+"=1", "GORACE=atexit_sleep_ms=0", ConfigEnvVar+`={"enabled":true,"denied_host_users":[]}`)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  shared.Handshake,
		Plugins:          map[string]plugin.Plugin{shared.KindDriver: &driver.Plugin{}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		GRPCDialOptions:  shared.DialOptions(),
		Logger:           hclog.NewNullLogger(),
	})
	t.Cleanup(client.Kill)
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	raw, err := rpc.Dispense(shared.KindDriver)
	if err != nil {
		t.Fatal(err)
	}
	return &pluginProcess{client: client, driver: raw.(driver.Driver), pid: client.ReattachConfig().Pid}
}

// TestTaskSurvivesPluginDeath kills the plugin process with SIGKILL while a
// task runs, and recovers the task in a new plugin process.
func TestTaskSurvivesPluginDeath(t *testing.T) {
	ctx := testCtx(t)
	first := startPluginProcess(t)
	fp, err := first.driver.Fingerprint(ctx)
	if err != nil || !fp.GetHealthy() {
		t.Fatalf("Fingerprint = %v, %v", fp, err)
	}
	cfg, gate := gatedTask(t, "alloc-1/survivor")
	h, err := first.driver.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}

	if err := syscall.Kill(first.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the plugin process to exit", first.client.Exited)
	if !procAlive(int(h.GetPid()), 0) {
		t.Fatal("the task died with the plugin")
	}

	second := startPluginProcess(t)
	if err := second.driver.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.driver.DestroyTask(context.Background(), h.GetId(), true) })
	openGate(t, gate)
	if res := awaitExit(t, second.driver, h.GetId()); res.GetExitCode() != 42 || res.GetErr() != "" {
		t.Fatalf("recovered exit = %v", res)
	}
	if got := readFile(t, cfg.GetStdoutPath()); got != "released\n" {
		t.Fatalf("stdout = %q", got)
	}
	// The supervisor outlived its driver for this task only: with its
	// driver gone, it leaves after its last task.
	st, err := decodeState(h.GetState())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the orphaned supervisor to exit", func() bool { return !procAlive(st.ShimPID, st.ShimStartTicks) })
}

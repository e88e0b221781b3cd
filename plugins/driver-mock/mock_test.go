package mock

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTimeout bounds every wait; generous for a loaded machine.
const testTimeout = 60 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func newDriver(t *testing.T) *Driver {
	d := New(nil, nil)
	t.Cleanup(d.Close)
	return d
}

// taskConfig is a mock task with cfg as its config block, in a fresh
// allocation directory with its logs in alloc/logs.
func taskConfig(t *testing.T, id string, cfg map[string]any) *driverpb.TaskConfig {
	t.Helper()
	alloc := t.TempDir()
	logs := filepath.Join(alloc, "alloc", "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &driverpb.TaskConfig{
		Id: id, AllocId: "a1", TaskName: "web", ConfigJson: raw,
		AllocDir: alloc, TaskDir: filepath.Join(alloc, "web"),
		StdoutPath: filepath.Join(logs, "web.stdout"), StderrPath: filepath.Join(logs, "web.stderr"),
	}
}

func wait(t *testing.T, d driver.Driver, id string) *driverpb.ExitResult {
	t.Helper()
	res, err := d.WaitTask(testCtx(t), id)
	if err != nil {
		t.Fatalf("WaitTask(%s): %v", id, err)
	}
	return res
}

// TestRunForExitAndOutput: the task writes stdout_string 1+stdout_repeat
// times and stderr_string once, then exits as configured.
func TestRunForExitAndOutput(t *testing.T) {
	ctx := testCtx(t)
	d := drivertest.Connect(t, newDriver(t))
	cfg := taskConfig(t, "a1/web", map[string]any{
		"run_for": "10ms", "exit_code": 7, "exit_signal": 9, "exit_err_msg": "the application crashed",
		"stdout_string": "hello\n", "stdout_repeat": 2, "stdout_repeat_duration": "1ms",
		"stderr_string": "oops\n",
	})
	h, err := d.StartTask(ctx, cfg)
	if err != nil || h.GetId() != cfg.GetId() || len(h.GetState()) == 0 {
		t.Fatalf("StartTask = %v, %v", h, err)
	}
	res := wait(t, d, cfg.GetId())
	if res.GetExitCode() != 7 || res.GetSignal() != 9 || res.GetErr() != "the application crashed" {
		t.Fatalf("exit = %v", res)
	}
	out, _ := os.ReadFile(cfg.GetStdoutPath())
	if string(out) != "hello\nhello\nhello\n" {
		t.Fatalf("stdout = %q", out)
	}
	errOut, _ := os.ReadFile(cfg.GetStderrPath())
	if string(errOut) != "oops\n" {
		t.Fatalf("stderr = %q", errOut)
	}
	st, err := d.InspectTask(ctx, cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_EXITED || st.GetExitResult().GetExitCode() != 7 {
		t.Fatalf("InspectTask = %v, %v", st, err)
	}
	if err := d.DestroyTask(ctx, cfg.GetId(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectTask(ctx, cfg.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("InspectTask after destroy = %v", err)
	}
}

// TestRotatedOutput: with log rotation the output goes to <base>.0.
func TestRotatedOutput(t *testing.T) {
	ctx := testCtx(t)
	d := newDriver(t)
	cfg := taskConfig(t, "a1/web", map[string]any{"stdout_string": "x"})
	cfg.LogRotation = &driverpb.LogRotation{MaxFiles: 2, MaxFileSizeBytes: 1 << 20}
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, d, cfg.GetId()); res.GetExitCode() != 0 || res.GetErr() != "" {
		t.Fatalf("exit = %v", res)
	}
	if out, _ := os.ReadFile(cfg.GetStdoutPath() + ".0"); string(out) != "x" {
		t.Fatalf("stdout.0 = %q", out)
	}
}

// TestStartErrors: start_error fails StartTask; unless recoverable the
// failure is the config's, which the client does not retry.
func TestStartErrors(t *testing.T) {
	ctx := testCtx(t)
	d := drivertest.Connect(t, newDriver(t))
	_, err := d.StartTask(ctx, taskConfig(t, "a1/fatal", map[string]any{"start_error": "boom"}))
	if !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("start_error: %v", err)
	}
	_, err = d.StartTask(ctx, taskConfig(t, "a1/retry", map[string]any{"start_error": "flaky", "start_error_recoverable": true}))
	if err == nil || errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "flaky") {
		t.Fatalf("recoverable start_error: %v", err)
	}
	for cfg, want := range map[string]string{
		`{"run_fr":"1s"}`:                "run_fr",
		`{"run_for":"soon"}`:             "run_for",
		`{"stdout_repeat":-1}`:           "stdout_repeat",
		`{"driver_port_map":"http"}`:     "driver_port_map",
		`{"exec_command":{"run_for":1}}`: "run_for",
		`{"kill_after":"9000h"}`:         "kill_after",
	} {
		tc := taskConfig(t, "a1/bad", nil)
		tc.ConfigJson = []byte(cfg)
		if _, err := d.StartTask(ctx, tc); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("StartTask(%s) = %v, want ErrInvalidConfig naming %s", cfg, err, want)
		}
	}
}

// TestStopKillAfterAndSignalError: a stopped task exits with its
// configured result, after kill_after; signal_error answers a signal.
func TestStopKillAfterAndSignalError(t *testing.T) {
	ctx := testCtx(t)
	d := drivertest.Connect(t, newDriver(t))
	cfg := taskConfig(t, "a1/web", map[string]any{
		"run_for": "1h", "exit_code": 3, "kill_after": "50ms", "signal_error": "no signals for me",
	})
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := d.SignalTask(ctx, cfg.GetId(), "SIGHUP"); err == nil || !strings.Contains(err.Error(), "no signals for me") {
		t.Fatalf("SignalTask = %v", err)
	}
	if err := d.SignalTask(ctx, cfg.GetId(), "SIGNOPE"); !errors.Is(err, driver.ErrInvalidSignal) {
		t.Fatalf("SignalTask(bad) = %v", err)
	}
	if err := d.DestroyTask(ctx, cfg.GetId(), false); !errors.Is(err, driver.ErrTaskRunning) {
		t.Fatalf("DestroyTask(running) = %v", err)
	}
	start := time.Now()
	if err := d.StopTask(ctx, cfg.GetId(), time.Second, ""); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("StopTask returned after %v, before kill_after", waited)
	}
	st, err := d.InspectTask(ctx, cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_EXITED || st.GetExitResult().GetExitCode() != 3 {
		t.Fatalf("after stop: %v, %v", st, err)
	}
	if err := d.SignalTask(ctx, cfg.GetId(), "SIGHUP"); !errors.Is(err, driver.ErrTaskNotRunning) {
		t.Fatalf("SignalTask(exited) = %v", err)
	}
}

// TestPluginExitAfter ends the task with Nomad's plugin-shutdown error.
func TestPluginExitAfter(t *testing.T) {
	d := newDriver(t)
	cfg := taskConfig(t, "a1/web", map[string]any{"run_for": "1h", "plugin_exit_after": "10ms"})
	if _, err := d.StartTask(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, d, cfg.GetId()); res.GetErr() != ErrPluginShutdown {
		t.Fatalf("exit = %v", res)
	}
}

// TestRecover: a new driver process recovers a task from its handle and
// lets it run out the rest of its run_for; a garbled handle is refused.
func TestRecover(t *testing.T) {
	ctx := testCtx(t)
	first := New(nil, nil)
	cfg := taskConfig(t, "a1/web", map[string]any{"run_for": "300ms", "exit_code": 5})
	h, err := first.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // the plugin process goes; the task is not finished
	if st, _ := first.InspectTask(ctx, cfg.GetId()); st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("closed driver finished the task: %v", st)
	}

	second := drivertest.Connect(t, newDriver(t))
	if err := second.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := second.RecoverTask(ctx, h); err != nil {
		t.Fatalf("second RecoverTask of a tracked task = %v", err)
	}
	if res := wait(t, second, cfg.GetId()); res.GetExitCode() != 5 {
		t.Fatalf("recovered exit = %v", res)
	}
	bad := &driverpb.TaskHandle{Id: "a1/x", State: []byte("garbage")}
	if err := second.RecoverTask(ctx, bad); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Fatalf("RecoverTask(garbage) = %v", err)
	}
}

// TestFingerprintAndConfig: disabled by default, with the reason;
// shutdown_periodic_after turns it undetected; bad keys are refused.
func TestFingerprintAndConfig(t *testing.T) {
	ctx := testCtx(t)
	def, err := ParsePluginConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	off := New(nil, def)
	defer off.Close()
	fp, _ := off.Fingerprint(ctx)
	if fp.GetDetected() || !strings.Contains(fp.GetHealthDescription(), "-dev") {
		t.Fatalf("default fingerprint = %v", fp)
	}
	if _, err := off.StartTask(ctx, taskConfig(t, "a1/x", nil)); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Fatalf("StartTask on disabled driver = %v", err)
	}
	on := newDriver(t)
	fp, _ = on.Fingerprint(ctx)
	if !fp.GetHealthy() || fp.GetAttributes()[AttrDriver] != "true" {
		t.Fatalf("enabled fingerprint = %v", fp)
	}
	cfg, err := ParsePluginConfig([]byte(`{"enabled":true,"shutdown_periodic_after":true,"shutdown_periodic_duration":0}`))
	if err != nil {
		t.Fatal(err)
	}
	gone := New(nil, cfg)
	defer gone.Close()
	if fp, _ := gone.Fingerprint(ctx); fp.GetDetected() {
		t.Fatalf("fingerprint past shutdown_periodic_duration = %v", fp)
	}
	c := drivertest.Connect(t, on)
	for raw, want := range map[string]string{
		`{"enabled":"yes"}`:                      "enabled",
		`{"fs_isolation":"vm"}`:                  "fs_isolation",
		`{"nope":1}`:                             "nope",
		`{"shutdown_periodic_duration":"later"}`: "shutdown_periodic_duration",
	} {
		if err := c.ValidateConfig(ctx, []byte(raw)); !errors.Is(err, driver.ErrInvalidPluginConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateConfig(%s) = %v, want a refusal naming %s", raw, err, want)
		}
	}
	if err := c.ValidateConfig(ctx, []byte(`{"enabled":true,"fs_isolation":"none","shutdown_periodic_duration":"5s"}`)); err != nil {
		t.Fatalf("ValidateConfig(good) = %v", err)
	}
}

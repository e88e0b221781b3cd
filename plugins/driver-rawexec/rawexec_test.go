package rawexec

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// serveEnvVar makes the test binary serve the plugin, for the tests that
// run the driver as a real plugin process.
const serveEnvVar = "RAWEXEC_TEST_SERVE"

// TestMain lets the test binary stand in for the plugin binary: the driver
// re-executes os.Executable() as the task supervisor, and Serve dispatches
// to the supervisor when ShimEnvVar is set, exactly as in production.
func TestMain(m *testing.M) {
	if mb := os.Getenv(hogEnvVar); mb != "" {
		os.Exit(hog(mb))
	}
	if os.Getenv(ShimEnvVar) != "" || os.Getenv(serveEnvVar) == "1" {
		Serve()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait in these tests; it only matters on failure.
const testTimeout = 30 * time.Second

const testPath = "/usr/local/bin:/usr/bin:/bin"

func testLogger() hclog.Logger {
	if os.Getenv("RAWEXEC_TEST_LOG") != "" {
		return hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: os.Stderr})
	}
	return hclog.NewNullLogger()
}

func newTestDriver() *Driver {
	d := New(testLogger())
	d.pollInterval = 10 * time.Millisecond
	// A race-enabled supervisor would otherwise linger a second at exit.
	d.shimEnv = []string{"GORACE=atexit_sleep_ms=0"}
	// Each test's supervisor goes with its last task, so none outlives
	// the tests (goleak would see its link's reader).
	d.supIdle = 0
	return d
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newTaskConfig returns a config for command in a fresh task directory,
// with stdout and stderr in files there.
func newTaskConfig(t *testing.T, id, command string, args ...string) *driverpb.TaskConfig {
	t.Helper()
	dir := t.TempDir()
	raw, err := json.Marshal(TaskConfig{Command: command, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	return &driverpb.TaskConfig{
		Id:         id,
		AllocId:    "alloc-1",
		TaskName:   filepath.Base(id),
		ConfigJson: raw,
		Env:        map[string]string{"PATH": testPath},
		TaskDir:    dir,
		AllocDir:   filepath.Dir(dir),
		StdoutPath: filepath.Join(dir, "stdout.log"),
		StderrPath: filepath.Join(dir, "stderr.log"),
	}
}

// start starts cfg on d and makes sure the task is gone when the test ends.
func start(t *testing.T, d driver.Driver, cfg *driverpb.TaskConfig) *driverpb.TaskHandle {
	t.Helper()
	h, err := d.StartTask(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("StartTask: %v", err)
	}
	t.Cleanup(func() {
		err := d.DestroyTask(context.Background(), cfg.GetId(), true)
		if err != nil && !errors.Is(err, driver.ErrTaskNotFound) {
			t.Errorf("DestroyTask: %v", err)
		}
	})
	if h.GetId() != cfg.GetId() || h.GetPid() <= 0 || h.GetStartedAtUnixNano() == 0 || len(h.GetState()) == 0 {
		t.Fatalf("incomplete handle %v", h)
	}
	return h
}

func awaitExit(t *testing.T, d driver.Driver, id string) *driverpb.ExitResult {
	t.Helper()
	res, err := d.WaitTask(testCtx(t), id)
	if err != nil {
		t.Fatalf("WaitTask(%s): %v", id, err)
	}
	return res
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// eventually polls cond until it holds or the test timeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waitForOutput waits until the task has written want to path: the way a
// test knows a shell task has installed its traps.
func waitForOutput(t *testing.T, path, want string) {
	t.Helper()
	eventually(t, "output "+want, func() bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), want)
	})
}

func TestInfoAndFingerprint(t *testing.T) {
	d := newTestDriver()
	info, err := d.Info(context.Background())
	if err != nil || info.GetName() != "raw_exec" || info.GetVersion() == "" {
		t.Fatalf("Info = %v, %v", info, err)
	}
	fp, err := d.Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !fp.GetDetected() || !fp.GetHealthy() || fp.GetAttributes()[AttrDriver] != "1" {
		t.Fatalf("Fingerprint = %v", fp)
	}
}

func TestTaskRunsAsConfigured(t *testing.T) {
	tests := []struct {
		name       string
		command    string
		args       []string
		env        map[string]string // replaces the default env when set
		wantCode   int32
		wantSignal int32
		// wantStdout receives the task directory.
		wantStdout func(dir string) string
		wantStderr string
	}{{
		name:       "exit code and both streams",
		command:    "/bin/sh",
		args:       []string{"-c", "echo hi; echo err >&2; exit 3"},
		wantCode:   3,
		wantStdout: func(string) string { return "hi\n" },
		wantStderr: "err\n",
	}, {
		name:       "success",
		command:    "true",
		wantStdout: func(string) string { return "" },
	}, {
		name:       "args reach the command unsplit",
		command:    "printf",
		args:       []string{"%s|", "a b", "c"},
		wantStdout: func(string) string { return "a b|c|" },
	}, {
		name:       "exactly the given env",
		command:    "env",
		env:        map[string]string{"PATH": testPath, "GREETING": "hello world", "EMPTY": ""},
		wantStdout: func(string) string { return "EMPTY=\nGREETING=hello world\nPATH=" + testPath + "\n" },
	}, {
		name:       "working directory is the task dir",
		command:    "/bin/sh",
		args:       []string{"-c", "pwd -P"},
		wantStdout: func(dir string) string { return dir + "\n" },
	}, {
		name:       "relative command runs from the task dir",
		command:    "./run.sh",
		wantCode:   4,
		wantStdout: func(string) string { return "script\n" },
	}, {
		name:       "killed by a signal",
		command:    "/bin/sh",
		args:       []string{"-c", "kill -KILL $$"},
		wantCode:   137,
		wantSignal: 9,
		wantStdout: func(string) string { return "" },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestDriver()
			cfg := newTaskConfig(t, "alloc-1/"+strings.ReplaceAll(tt.name, " ", "-"), tt.command, tt.args...)
			if tt.env != nil {
				cfg.Env = tt.env
			}
			dir, err := filepath.EvalSymlinks(cfg.GetTaskDir())
			if err != nil {
				t.Fatal(err)
			}
			script := "#!/bin/sh\necho script\nexit 4\n"
			if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			start(t, d, cfg)
			res := awaitExit(t, d, cfg.GetId())
			if res.GetExitCode() != tt.wantCode || res.GetSignal() != tt.wantSignal || res.GetErr() != "" {
				t.Errorf("exit = %v, want code %d signal %d", res, tt.wantCode, tt.wantSignal)
			}
			if got, want := readFile(t, cfg.GetStdoutPath()), tt.wantStdout(dir); got != want {
				t.Errorf("stdout = %q, want %q", got, want)
			}
			if got := readFile(t, cfg.GetStderrPath()); got != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", got, tt.wantStderr)
			}
		})
	}
}

func TestOutputIsAppended(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/append", "/bin/sh", "-c", "echo second")
	if err := os.WriteFile(cfg.GetStdoutPath(), []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start(t, d, cfg)
	awaitExit(t, d, cfg.GetId())
	if got := readFile(t, cfg.GetStdoutPath()); got != "first\nsecond\n" {
		t.Fatalf("stdout = %q", got)
	}
}

func TestRunAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a task as another user needs root")
	}
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/user", "id", "-u")
	cfg.User = "nobody"
	// nobody must be able to enter its task dir, and t.TempDir's parent
	// is private to root.
	dir, err := os.MkdirTemp("", "rawexec-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.TaskDir = dir
	cfg.StdoutPath = filepath.Join(dir, "stdout.log")
	cfg.StderrPath = filepath.Join(dir, "stderr.log")
	start(t, d, cfg)
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v; stderr %q", res, readFile(t, cfg.GetStderrPath()))
	}
	if got := strings.TrimSpace(readFile(t, cfg.GetStdoutPath())); got != "65534" {
		t.Fatalf("task ran as uid %q, want nobody's 65534", got)
	}
}

func TestBackgroundedProcessesDieWithTheTask(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/bg", "/bin/sh", "-c", "sleep 60 & echo $!")
	start(t, d, cfg)
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, cfg.GetStdoutPath())))
	if err != nil || pid <= 0 {
		t.Fatalf("background pid: %v", err)
	}
	eventually(t, "backgrounded sleep to die", func() bool { return !procAlive(pid, 0) })
}

func TestStartTaskRefusals(t *testing.T) {
	d := newTestDriver()
	tests := []struct {
		name    string
		mutate  func(cfg *driverpb.TaskConfig)
		wantErr error
		wantMsg string
	}{
		{"unknown command", func(c *driverpb.TaskConfig) { setConfig(c, `{"command":"no-such-command-xyz"}`) },
			driver.ErrInvalidConfig, `command "no-such-command-xyz" not found in PATH`},
		{"missing absolute command", func(c *driverpb.TaskConfig) { setConfig(c, `{"command":"/no/such/bin"}`) },
			driver.ErrInvalidConfig, `command "/no/such/bin"`},
		{"directory as command", func(c *driverpb.TaskConfig) { setConfig(c, `{"command":"/bin/"}`) },
			driver.ErrInvalidConfig, "is a directory"},
		{"command without PATH entry", func(c *driverpb.TaskConfig) { c.Env = map[string]string{"PATH": "/nonexistent"} },
			driver.ErrInvalidConfig, `not found in PATH "/nonexistent"`},
		{"missing command", func(c *driverpb.TaskConfig) { setConfig(c, `{"args":["x"]}`) },
			driver.ErrInvalidConfig, "command is required"},
		{"empty config", func(c *driverpb.TaskConfig) { c.ConfigJson = nil },
			driver.ErrInvalidConfig, "command is required"},
		{"misspelt key", func(c *driverpb.TaskConfig) { setConfig(c, `{"command":"true","arg":["x"]}`) },
			driver.ErrInvalidConfig, `unknown field "arg"`},
		{"args not strings", func(c *driverpb.TaskConfig) { setConfig(c, `{"command":"true","args":[1]}`) },
			driver.ErrInvalidConfig, "config"},
		{"no id", func(c *driverpb.TaskConfig) { c.Id = "" },
			driver.ErrInvalidConfig, "task id is required"},
		{"relative task dir", func(c *driverpb.TaskConfig) { c.TaskDir = "local" },
			driver.ErrInvalidConfig, "absolute"},
		{"missing task dir", func(c *driverpb.TaskConfig) { c.TaskDir = "/no/such/dir" },
			driver.ErrInvalidConfig, "not a directory"},
		{"bad kill signal", func(c *driverpb.TaskConfig) { c.KillSignal = "SIGNOPE" },
			driver.ErrInvalidConfig, "SIGNOPE"},
		{"unknown user", func(c *driverpb.TaskConfig) { c.User = "no-such-user-xyz" },
			driver.ErrInvalidConfig, "no-such-user-xyz"},
		{"no log files", func(c *driverpb.TaskConfig) { c.LogRotation = &driverpb.LogRotation{MaxFileSizeBytes: 1} },
			driver.ErrInvalidConfig, "log_rotation.max_files must be at least 1, got 0"},
		{"no log file size", func(c *driverpb.TaskConfig) { c.LogRotation = &driverpb.LogRotation{MaxFiles: 1, MaxFileSizeBytes: -5} },
			driver.ErrInvalidConfig, "log_rotation.max_file_size_bytes must be at least 1, got -5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := newTaskConfig(t, "alloc-1/refused", "true")
			tt.mutate(cfg)
			_, err := d.StartTask(testCtx(t), cfg)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("StartTask error = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if _, err := d.InspectTask(context.Background(), cfg.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
				t.Fatalf("refused task is tracked: %v", err)
			}
		})
	}
}

func setConfig(cfg *driverpb.TaskConfig, js string) { cfg.ConfigJson = []byte(js) }

func TestStartFailureInsideShim(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/unwritable-output", "true")
	cfg.StdoutPath = filepath.Join(cfg.GetTaskDir(), "no-such-dir", "stdout.log")
	_, err := d.StartTask(testCtx(t), cfg)
	if err == nil || !strings.Contains(err.Error(), "open task output") {
		t.Fatalf("StartTask error = %v, want the shim's open failure", err)
	}
	if _, err := d.InspectTask(context.Background(), cfg.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("failed task is tracked: %v", err)
	}
}

func TestDuplicateStartIsRefused(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/dup", "true")
	start(t, d, cfg)
	if _, err := d.StartTask(testCtx(t), cfg); !errors.Is(err, driver.ErrTaskExists) {
		t.Fatalf("second StartTask error = %v, want ErrTaskExists", err)
	}
	awaitExit(t, d, cfg.GetId())
}

func TestInspectWaitDestroy(t *testing.T) {
	d := newTestDriver()
	ctx := testCtx(t)
	cfg := newTaskConfig(t, "alloc-1/lifecycle", "/bin/sh", "-c", "read x < gate; exit 6")
	gate := mkfifo(t, cfg.GetTaskDir(), "gate")
	h := start(t, d, cfg)

	st, err := d.InspectTask(ctx, cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING || st.GetPid() != h.GetPid() ||
		st.GetExitResult() != nil {
		t.Fatalf("running InspectTask = %v, %v", st, err)
	}
	if err := d.DestroyTask(ctx, cfg.GetId(), false); !errors.Is(err, driver.ErrTaskRunning) {
		t.Fatalf("DestroyTask without force on a running task = %v, want ErrTaskRunning", err)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.WaitTask(waitCtx, cfg.GetId()); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitTask with a cancelled ctx = %v", err)
	}

	openGate(t, gate)
	for i := 0; i < 2; i++ { // a result can be collected any number of times
		if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 6 {
			t.Fatalf("exit = %v, want 6", res)
		}
	}
	st, err = d.InspectTask(ctx, cfg.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_EXITED || st.GetExitResult().GetExitCode() != 6 ||
		st.GetCompletedAtUnixNano() < st.GetStartedAtUnixNano() {
		t.Fatalf("exited InspectTask = %v, %v", st, err)
	}
	if err := d.SignalTask(ctx, cfg.GetId(), "SIGHUP"); !errors.Is(err, driver.ErrTaskNotRunning) {
		t.Fatalf("SignalTask on an exited task = %v, want ErrTaskNotRunning", err)
	}
	if err := d.StopTask(ctx, cfg.GetId(), time.Second, ""); err != nil {
		t.Fatalf("StopTask on an exited task = %v, want no-op", err)
	}
	if err := d.DestroyTask(ctx, cfg.GetId(), false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.GetTaskDir(), exitFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("exit file left behind: %v", err)
	}
	for name, call := range map[string]func() error{
		"Inspect": func() error { _, err := d.InspectTask(ctx, cfg.GetId()); return err },
		"Wait":    func() error { _, err := d.WaitTask(ctx, cfg.GetId()); return err },
		"Stop":    func() error { return d.StopTask(ctx, cfg.GetId(), 0, "") },
		"Signal":  func() error { return d.SignalTask(ctx, cfg.GetId(), "SIGHUP") },
		"Destroy": func() error { return d.DestroyTask(ctx, cfg.GetId(), true) },
	} {
		if err := call(); !errors.Is(err, driver.ErrTaskNotFound) {
			t.Errorf("%s after destroy = %v, want ErrTaskNotFound", name, err)
		}
	}
}

func TestSignalTask(t *testing.T) {
	d := newTestDriver()
	ctx := testCtx(t)
	cfg := newTaskConfig(t, "alloc-1/signal", "/bin/sh", "-c",
		`trap 'echo got-usr1; exit 5' USR1; echo ready; while :; do sleep 0.05; done`)
	start(t, d, cfg)
	waitForOutput(t, cfg.GetStdoutPath(), "ready")
	if err := d.SignalTask(ctx, cfg.GetId(), "NOPE"); !errors.Is(err, driver.ErrInvalidSignal) {
		t.Fatalf("SignalTask(NOPE) = %v, want ErrInvalidSignal", err)
	}
	if err := d.SignalTask(ctx, cfg.GetId(), "usr1"); err != nil {
		t.Fatal(err)
	}
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 5 || res.GetSignal() != 0 {
		t.Fatalf("exit = %v, want the trap's 5", res)
	}
	if got := readFile(t, cfg.GetStdoutPath()); got != "ready\ngot-usr1\n" {
		t.Fatalf("stdout = %q", got)
	}
}

func TestDestroyForceKills(t *testing.T) {
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/force", "sleep", "60")
	start(t, d, cfg)
	if err := d.DestroyTask(testCtx(t), cfg.GetId(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitTask(testCtx(t), cfg.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Fatalf("WaitTask after destroy = %v", err)
	}
}

func mkfifo(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// openGate releases a task blocked reading the fifo at path. Opening
// without blocking fails until the task has opened its end, so a task that
// died early fails the test instead of hanging it.
func openGate(t *testing.T, path string) {
	t.Helper()
	var f *os.File
	eventually(t, "the task to open "+path, func() bool {
		var err error
		f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil
	})
	defer f.Close()
	if _, err := f.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
}

// An agent started under nohup has SIGHUP ignored, and an ignore outlives
// exec: the task must still start with SIGHUP and SIGINT at their
// default action, or its `trap … HUP` and change_mode = "signal" never
// fire.
func TestTaskStartsWithSignalsUnignored(t *testing.T) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT)
	defer signal.Reset(syscall.SIGHUP, syscall.SIGINT)
	d := newTestDriver()
	cfg := newTaskConfig(t, "alloc-1/nohup", "/bin/sh", "-c", "grep '^SigIgn:' /proc/self/status")
	start(t, d, cfg)
	if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
	out := strings.TrimSpace(readFile(t, cfg.GetStdoutPath()))
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(out, "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatalf("task's SigIgn line %q: %v", out, err)
	}
	for _, s := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT} {
		if mask&(1<<(uint(s)-1)) != 0 {
			t.Errorf("the task starts with %v ignored (SigIgn %016x)", s, mask)
		}
	}
}

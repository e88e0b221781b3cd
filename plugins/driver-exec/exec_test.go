package execdriver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/internal/testwait"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// TestMain lets the test binary stand in for the plugin binary: raw_exec
// re-executes it as the task supervisor, and the supervisor as the task's
// init, exactly as in production.
func TestMain(m *testing.M) {
	if os.Getenv(InitEnvVar) != "" || os.Getenv(rawexec.ShimEnvVar) != "" {
		Serve()
		os.Exit(0)
	}
	// raw_exec's supervisor link outlives a test by its idle time.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/drover-org/drover/plugins/driver-rawexec.(*supervisor).end"),
		goleak.IgnoreAnyFunction("github.com/drover-org/drover/plugins/driver-rawexec.(*supervisor).read"),
		goleak.IgnoreAnyFunction("github.com/drover-org/drover/plugins/driver-rawexec.(*Driver).supervisorIdle"))
}

const testTimeout = 60 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// needIsolation skips a test that runs tasks where the driver cannot.
func needIsolation(t *testing.T, d *Driver) {
	t.Helper()
	fp, err := d.Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !fp.GetHealthy() {
		t.Skipf("exec driver unusable here: %s", fp.GetHealthDescription())
	}
}

// taskConfig lays out an allocation as the client does and returns an
// exec task in it running sh -c script.
func taskConfig(t *testing.T, id, script string) *driverpb.TaskConfig {
	t.Helper()
	alloc := t.TempDir()
	if err := os.Chmod(alloc, 0o755); err != nil {
		t.Fatal(err)
	}
	taskDir := filepath.Join(alloc, "web")
	for _, d := range []string{"alloc/logs", "alloc/data", "alloc/tmp", "web/local", "web/tmp"} {
		if err := os.MkdirAll(filepath.Join(alloc, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(taskDir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(TaskConfig{Command: "/bin/sh", Args: []string{"-c", script}})
	return &driverpb.TaskConfig{
		Id: id, AllocId: "a1", TaskName: "web", ConfigJson: raw,
		Env: map[string]string{
			"PATH": "/usr/local/bin:/usr/bin:/bin", "NOMAD_TASK_DIR": filepath.Join(taskDir, "local"),
			"NOMAD_ALLOC_DIR": filepath.Join(alloc, "alloc"),
		},
		AllocDir: alloc, TaskDir: taskDir,
		StdoutPath: filepath.Join(alloc, "alloc/logs/web.stdout"),
		StderrPath: filepath.Join(alloc, "alloc/logs/web.stderr"),
		Resources:  &driverpb.Resources{Cpu: 100, MemoryMb: 256},
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

func read(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}

// eventually polls cond until it holds or the test timeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, testTimeout, what, cond)
}

// hostMounts lists the mount points of the host's (this process's) mount
// namespace beneath dir.
func hostMounts(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir) {
			out = append(out, fields[4])
		}
	}
	return out
}

// TestIsolation runs a task that reports what it sees: its own PID
// namespace, only its root, its user, the Nomad paths, and where it can
// write. No mount it made shows on the host, during or after.
func TestIsolation(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	c := drivertest.Connect(t, d)
	ctx := testCtx(t)
	script := `
echo "procs=$(ls /proc | grep -c '^[0-9]')"
test -e /proc/$HOST_PID && echo "sees=host-pid"
test -e /work && echo "sees=/work"
test -e /old_root && echo "sees=/old_root"
test -e /usr/bin/env && echo "has=/usr/bin/env"
test -e /etc/passwd && echo "has=/etc/passwd"
echo "uid=$(id -u)"
echo "taskdir=$NOMAD_TASK_DIR allocdir=$NOMAD_ALLOC_DIR"
touch /etc/drover-x 2>/dev/null && echo "wrote=/etc"
touch /usr/drover-x 2>/dev/null && echo "wrote=/usr"
touch /drover-x 2>/dev/null && echo "wrote=/"
touch /local/ok && echo "wrote=/local"
touch /secrets/ok && echo "wrote=/secrets"
touch /alloc/data/ok && echo "wrote=/alloc/data"
touch /tmp/ok && echo "wrote=/tmp"
echo done
`
	cfg := taskConfig(t, "a1/iso", script)
	cfg.Env["HOST_PID"] = strconv.Itoa(os.Getpid())
	if _, err := c.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, c, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit %v; stderr %s", res, read(t, cfg.GetStderrPath()))
	}
	out := read(t, cfg.GetStdoutPath())
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[l] = true
	}
	for l := range lines {
		if n, ok := strings.CutPrefix(l, "procs="); ok && (len(n) != 1 || n == "0") {
			t.Errorf("the task sees %s processes: not its own PID namespace", n)
		}
	}
	for _, want := range []string{"has=/usr/bin/env", "has=/etc/passwd", "uid=65534",
		"taskdir=/local allocdir=/alloc", "wrote=/local", "wrote=/secrets", "wrote=/alloc/data", "wrote=/tmp", "done"} {
		if !lines[want] {
			t.Errorf("task output lacks %q:\n%s\nstderr: %s", want, out, read(t, cfg.GetStderrPath()))
		}
	}
	for _, bad := range []string{"sees=host-pid", "sees=/work", "sees=/old_root", "wrote=/etc", "wrote=/usr", "wrote=/"} {
		if lines[bad] {
			t.Errorf("task output has %q:\n%s", bad, out)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.GetAllocDir(), "alloc/data/ok")); err != nil {
		t.Errorf("/alloc/data is not the allocation's data dir: %v", err)
	}
	if m := hostMounts(t, cfg.GetAllocDir()); len(m) != 0 {
		t.Errorf("mounts left on the host beneath the allocation: %v", m)
	}
}

// TestMemoryLimit: a task past its memory limit is killed by the kernel.
func TestMemoryLimit(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	cfg := taskConfig(t, "a1/hog", "tail /dev/zero")
	cfg.Resources = &driverpb.Resources{Cpu: 100, MemoryMb: 48}
	if _, err := d.StartTask(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	res := wait(t, d, cfg.GetId())
	if !res.GetOomKilled() && res.GetSignal() != int32(syscall.SIGKILL) {
		t.Fatalf("hog exit = %v, want killed for memory", res)
	}
}

// pidsWith lists host pids whose command line contains marker.
func pidsWith(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestStopKillsTree: stopping the task kills what it started, also what
// left its session; SignalTask reaches the command itself; a driver
// restart recovers the task from its handle.
func TestStopKillsTree(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	ctx := testCtx(t)
	cfg := taskConfig(t, "a1/tree", `trap 'echo hup' HUP; setsid sleep 987651 & sleep 987652 & echo started; while :; do sleep 0.05; done`)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.DestroyTask(context.Background(), h.GetId(), true) })
	eventually(t, "the task's start", func() bool { return strings.Contains(read(t, cfg.GetStdoutPath()), "started") })
	eventually(t, "both sleeps", func() bool { return len(pidsWith("sleep\x0098765")) == 2 })
	if m := hostMounts(t, cfg.GetAllocDir()); len(m) != 0 {
		t.Errorf("the task's mounts show on the host: %v", m)
	}

	// A new driver process recovers the task.
	d2 := New(nil, nil)
	if err := d2.RecoverTask(ctx, h); err != nil {
		t.Fatal(err)
	}
	if err := d2.SignalTask(ctx, h.GetId(), "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the trap's output", func() bool { return strings.Contains(read(t, cfg.GetStdoutPath()), "hup") })
	if err := d2.StopTask(ctx, h.GetId(), 10*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	res := wait(t, d2, h.GetId())
	if res.GetSignal() != int32(syscall.SIGTERM) {
		t.Errorf("stopped task's exit = %v, want SIGTERM", res)
	}
	eventually(t, "the sleeps' end", func() bool { return len(pidsWith("sleep\x0098765")) == 0 })
	if err := d2.DestroyTask(ctx, h.GetId(), false); err != nil {
		t.Fatal(err)
	}
}

// TestExitCode: the task's exit code is the command's.
func TestExitCode(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	cfg := taskConfig(t, "a1/code", "echo err >&2; exit 7")
	if _, err := d.StartTask(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, d, cfg.GetId()); res.GetExitCode() != 7 || res.GetSignal() != 0 {
		t.Fatalf("exit = %v", res)
	}
	if got := read(t, cfg.GetStderrPath()); got != "err\n" {
		t.Fatalf("stderr = %q", got)
	}
}

// TestHostModesAndRootUser: pid_mode = "host" shows the host's processes;
// a root task keeps only the default capabilities.
func TestHostModesAndRootUser(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	script := `test -e /proc/$HOST_PID && echo sees-host-pid; grep CapBnd /proc/self/status`
	cfg := taskConfig(t, "a1/host", script)
	cfg.Env["HOST_PID"] = strconv.Itoa(os.Getpid())
	raw, _ := json.Marshal(TaskConfig{Command: "/bin/sh", Args: []string{"-c", script},
		PIDMode: "host", CapDrop: []string{"CAP_KILL"}})
	cfg.ConfigJson = raw
	cfg.User = "root"
	if _, err := d.StartTask(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v: %s", res, read(t, cfg.GetStderrPath()))
	}
	out := read(t, cfg.GetStdoutPath())
	if !strings.Contains(out, "sees-host-pid") {
		t.Errorf("pid_mode host: %s", out)
	}
	// The default set without kill (bit 5): chown dac_override fowner
	// fsetid setgid setuid setpcap net_bind_service sys_chroot mknod
	// audit_write setfcap.
	if !strings.Contains(out, "CapBnd:\t00000000a80405db") {
		t.Errorf("bounding set: %s", out)
	}
}

// TestBadConfig: what cannot run fails StartTask naming the field.
func TestBadConfig(t *testing.T) {
	d := New(nil, nil)
	for _, tc := range []struct {
		cfg, user, want string
	}{
		{`{"comand":"/bin/true"}`, "", "comand"},
		{`{}`, "", "command is required"},
		{`{"command":"/no/such/binary"}`, "", "/no/such/binary"},
		{`{"command":"no-such-command-xyz"}`, "", "no-such-command-xyz"},
		{`{"command":"/bin/true","pid_mode":"shared"}`, "", "pid_mode"},
		{`{"command":"/bin/true","cap_add":["sys_admin"]}`, "", "allow_caps"},
		{`{"command":"/bin/true","cap_drop":["bogus"]}`, "", "cap_drop[0]"},
		{`{"command":"/bin/true","work_dir":"rel"}`, "", "work_dir"},
		{`{"command":"/bin/true"}`, "no-such-user-xyz", "no-such-user-xyz"},
	} {
		cfg := taskConfig(t, "a1/bad", "")
		cfg.ConfigJson, cfg.User = []byte(tc.cfg), tc.user
		_, err := d.prepare(cfg)
		if !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("prepare(%s, user %q) = %v, want ErrInvalidConfig naming %s", tc.cfg, tc.user, err, tc.want)
		}
	}
	for raw, want := range map[string]string{
		`{"default_pid_mode":"x"}`: "default_pid_mode",
		`{"allow_caps":["nope"]}`:  "allow_caps[0]",
		`{"enabled":true}`:         "enabled",
	} {
		if err := d.ValidateConfig(context.Background(), []byte(raw)); !errors.Is(err, driver.ErrInvalidPluginConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateConfig(%s) = %v", raw, err)
		}
	}
}

// TestFingerprintUndetected: without namespaces the driver says so.
func TestFingerprintUndetected(t *testing.T) {
	d := New(nil, nil)
	d.nsDir = t.TempDir()
	fp, err := d.Fingerprint(context.Background())
	if err != nil || fp.GetDetected() || fp.GetHealthDescription() == "" {
		t.Fatalf("Fingerprint = %v, %v", fp, err)
	}
	if _, err := d.StartTask(context.Background(), taskConfig(t, "a1/x", "true")); !errors.Is(err, driver.ErrInvalidConfig) {
		t.Fatalf("StartTask on an unusable driver = %v", err)
	}
}

// TestResultPipeNotInherited: the command cannot reach the init's result
// pipe (fd 3), so it can neither forge its exit nor, by leaving a daemon
// that holds it, keep the task from ending with pid_mode = "host".
func TestResultPipeNotInherited(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	cfg := taskConfig(t, "a1/fd", `test -e /proc/self/fd/3 && echo has-fd-3; echo '{"code":0}' >&3 2>/dev/null; exit 5`)
	if _, err := d.StartTask(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, d, cfg.GetId()); res.GetExitCode() != 5 {
		t.Fatalf("exit = %v, want the command's 5", res)
	}
	if out := read(t, cfg.GetStdoutPath()); strings.Contains(out, "has-fd-3") {
		t.Fatalf("the command inherited the result pipe: %q", out)
	}
}

// TestRestartInSameDirs: a task restarted in its task directory (the
// client's restart policy) finds the mount points and links its first
// run left and starts again.
func TestRestartInSameDirs(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	ctx := testCtx(t)
	cfg := taskConfig(t, "a1/again", `echo run; ls /usr/bin/env >/dev/null`)
	for i := range 2 {
		if _, err := d.StartTask(ctx, cfg); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if res := wait(t, d, cfg.GetId()); res.GetExitCode() != 0 {
			t.Fatalf("run %d: exit %v: %s", i, res, read(t, cfg.GetStderrPath()))
		}
		if err := d.DestroyTask(ctx, cfg.GetId(), false); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, cfg.GetStdoutPath()); got != "run\nrun\n" {
		t.Fatalf("stdout = %q", got)
	}
}

package rawexec

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// hogEnvVar makes the test binary a task that allocates and touches this
// many MiB, then exits 0: a task that outgrows its memory limit.
const hogEnvVar = "RAWEXEC_TEST_HOG_MB"

func hog(mbStr string) int {
	mb, err := strconv.Atoi(mbStr)
	if err != nil {
		return 3
	}
	var chunks [][]byte
	for i := 0; i < mb; i++ {
		c := make([]byte, 1<<20)
		for j := range c {
			c[j] = byte(j)
		}
		chunks = append(chunks, c)
	}
	_ = len(chunks)
	return 0
}

// needCgroups skips a test that needs root and a writable cgroup
// hierarchy, saying which is missing.
func needCgroups(t *testing.T) *cgroupHost {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	h, err := detectCgroups(cgroupRoot)
	if err != nil {
		t.Skipf("no usable cgroup hierarchy: %v", err)
	}
	return h
}

// prodDriver is a driver with the defaults an operator gets outside -dev
// once they enable it: root denied, cgroups required.
func prodDriver(t *testing.T, mutate func(*PluginConfig)) *Driver {
	t.Helper()
	cfg, err := ParsePluginConfig([]byte(`{"enabled":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(cfg)
	}
	d := NewConfigured(testLogger(), cfg)
	d.pollInterval = newTestDriver().pollInterval
	d.shimEnv = []string{"GORACE=atexit_sleep_ms=0"}
	d.supIdle = 0
	return d
}

// Without the operator's enabled = true the driver is undetected, with the
// reason, and starts nothing.
func TestDisabledByDefault(t *testing.T) {
	for name, raw := range map[string]string{"no config": "", "enabled = false": `{"enabled":false}`} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ParsePluginConfig([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			d := NewConfigured(testLogger(), cfg)
			fp, err := d.Fingerprint(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if fp.GetDetected() || fp.GetHealthy() || fp.GetAttributes()[AttrDriver] != "" ||
				!strings.Contains(fp.GetHealthDescription(), "enabled = true") {
				t.Fatalf("Fingerprint = %v; want undetected, saying how to enable it", fp)
			}
			tc := newTaskConfig(t, "alloc-1/disabled", "/bin/true")
			if _, err := d.StartTask(testCtx(t), tc); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "disabled") {
				t.Fatalf("StartTask on a disabled driver: %v", err)
			}
		})
	}
}

// Where no cgroup hierarchy is writable, an enabled driver is unhealthy
// and refuses tasks, naming the controller and the opt-out; with
// no_cgroups it runs them without.
func TestNoCgroupHierarchy(t *testing.T) {
	d := prodDriver(t, func(c *PluginConfig) { c.DeniedHostUsers = []string{} })
	d.cgroupRoot = t.TempDir() // a plain directory: no hierarchy mounted
	fp, err := d.Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !fp.GetDetected() || fp.GetHealthy() || !strings.Contains(fp.GetHealthDescription(), `cgroup controller "freezer"`) ||
		!strings.Contains(fp.GetHealthDescription(), "no_cgroups = true") {
		t.Fatalf("Fingerprint = %v; want unhealthy naming the controller and no_cgroups", fp)
	}
	tc := newTaskConfig(t, "alloc-1/nocg", "/bin/true")
	if _, err := d.StartTask(testCtx(t), tc); err == nil || !strings.Contains(err.Error(), `cgroup controller "freezer"`) {
		t.Fatalf("StartTask without cgroups: %v", err)
	}

	d = prodDriver(t, func(c *PluginConfig) { c.DeniedHostUsers = []string{}; c.NoCgroups = true })
	d.cgroupRoot = t.TempDir()
	fp, err = d.Fingerprint(context.Background())
	if err != nil || !fp.GetHealthy() || fp.GetAttributes()[AttrCgroups] != "off" {
		t.Fatalf("Fingerprint with no_cgroups = %v, %v", fp, err)
	}
	start(t, d, tc)
	if res := awaitExit(t, d, tc.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
}

// A task's cgroup carries its limits (memory_max hard, memory soft, MHz as
// cpu shares), holds the task, and is removed once the task is gone.
func TestCgroupCarriesLimits(t *testing.T) {
	h := needCgroups(t)
	d := newTestDriver()
	tc := newTaskConfig(t, "alloc-1/limits", "sleep", "300")
	tc.Resources = &driverpb.Resources{Cpu: 300, MemoryMb: 64, MemoryMaxMb: 128}
	hd := start(t, d, tc)
	tk, err := d.lookup(tc.GetId())
	if err != nil {
		t.Fatal(err)
	}
	cg := tk.state.Cgroup
	if cg == nil {
		t.Fatal("task has no cgroup")
	}
	read := func(key, file string) string {
		t.Helper()
		return strings.TrimSpace(readFile(t, filepath.Join(cg.Dirs[key], file)))
	}
	if h.v2 {
		if got := read(unifiedKey, "memory.max"); got != strconv.Itoa(128<<20) {
			t.Errorf("memory.max = %s", got)
		}
		if got := read(unifiedKey, "memory.low"); got != strconv.Itoa(64<<20) {
			t.Errorf("memory.low = %s", got)
		}
		if got := read(unifiedKey, "cpu.weight"); got != strconv.FormatInt(cgroupResources{CPUMHz: 300}.cpuWeight(), 10) {
			t.Errorf("cpu.weight = %s", got)
		}
	} else {
		if got := read("memory", "memory.limit_in_bytes"); got != strconv.Itoa(128<<20) {
			t.Errorf("memory.limit_in_bytes = %s", got)
		}
		if got := read("memory", "memory.soft_limit_in_bytes"); got != strconv.Itoa(64<<20) {
			t.Errorf("memory.soft_limit_in_bytes = %s", got)
		}
		if got := read("cpu", "cpu.shares"); got != "300" {
			t.Errorf("cpu.shares = %s", got)
		}
	}
	pids, err := cg.pids()
	if err != nil || len(pids) != 1 || int64(pids[0]) != hd.GetPid() {
		t.Errorf("cgroup holds %v (%v); want only the task's pid %d", pids, err, hd.GetPid())
	}
	if err := d.StopTask(testCtx(t), tc.GetId(), testTimeout, ""); err != nil {
		t.Fatal(err)
	}
	for _, dir := range cg.Dirs {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left behind after the task exited (%v)", dir, err)
		}
	}
}

// grandchildTask is a shell task that starts a grandchild in a
// session of its own (out of the task's process group) and records its
// pid in the task dir's "gc.pid".
func grandchildTask(t *testing.T, id, then string) (*driverpb.TaskConfig, string) {
	tc := newTaskConfig(t, id, "/bin/sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > gc.pid.tmp && mv gc.pid.tmp gc.pid; "+then)
	return tc, filepath.Join(tc.GetTaskDir(), "gc.pid")
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	var pid int
	eventually(t, "the grandchild's pid", func() bool {
		raw, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(raw)))
		return err == nil
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// A process the task detached with setsid is killed with the task: on
// stop, and when the task's main process exits on its own.
func TestDetachedGrandchildDies(t *testing.T) {
	needCgroups(t)
	t.Run("stop", func(t *testing.T) {
		d := newTestDriver()
		tc, pidFile := grandchildTask(t, "alloc-1/setsid-stop", "exec sleep 300")
		start(t, d, tc)
		pid := readPid(t, pidFile)
		if err := d.StopTask(testCtx(t), tc.GetId(), testTimeout, ""); err != nil {
			t.Fatal(err)
		}

		eventually(t, "the setsid grandchild to die", func() bool { return !procAlive(pid, 0) })
	})
	t.Run("exit", func(t *testing.T) {
		d := newTestDriver()
		tc, pidFile := grandchildTask(t, "alloc-1/setsid-exit", "exit 0")
		start(t, d, tc)
		pid := readPid(t, pidFile)
		if res := awaitExit(t, d, tc.GetId()); res.GetExitCode() != 0 {
			t.Fatalf("exit = %v", res)
		}
		eventually(t, "the setsid grandchild to die", func() bool { return !procAlive(pid, 0) })
	})
}

// The cgroup is found again from the task's handle: a new driver process
// (here a new Driver) stops a recovered task's whole tree.
func TestRecoveredTaskTreeKilled(t *testing.T) {
	needCgroups(t)
	d1 := newTestDriver()
	tc, pidFile := grandchildTask(t, "alloc-1/setsid-recover", "exec sleep 300")
	h, err := d1.StartTask(testCtx(t), tc)
	if err != nil {
		t.Fatal(err)
	}
	pid := readPid(t, pidFile)
	d2 := newTestDriver()
	if err := d2.RecoverTask(testCtx(t), h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d2.DestroyTask(context.Background(), tc.GetId(), true) })
	tk, _ := d2.lookup(tc.GetId())
	if tk == nil || tk.state.Cgroup == nil {
		t.Fatal("the recovered task lost its cgroup")
	}
	if err := d2.StopTask(testCtx(t), tc.GetId(), testTimeout, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the setsid grandchild to die", func() bool { return !procAlive(pid, 0) })
	// d1 still watches its shim child; it sees the same exit.
	awaitExit(t, d1, tc.GetId())
	_ = d1.DestroyTask(context.Background(), tc.GetId(), true)
}

// A task allocating past its memory limit is killed by the kernel, and
// its exit says so.
func TestMemoryLimitEnforced(t *testing.T) {
	needCgroups(t)
	d := newTestDriver()
	tc := newTaskConfig(t, "alloc-1/hog", os.Args[0])
	tc.Env[hogEnvVar] = "256"
	tc.Resources = &driverpb.Resources{Cpu: 100, MemoryMb: 32}
	start(t, d, tc)
	res := awaitExit(t, d, tc.GetId())
	if res.GetSignal() != int32(syscall.SIGKILL) || !res.GetOomKilled() {
		t.Fatalf("exit = %v; want killed by the OOM killer; stderr %q", res, readFile(t, tc.GetStderrPath()))
	}
}

// newUserTaskDirs lays out an allocation as the client does (root-owned,
// secrets 0700) in a directory nobody can enter.
func newUserTaskDirs(t *testing.T, tc *driverpb.TaskConfig) {
	t.Helper()
	alloc, err := os.MkdirTemp("", "rawexec-alloc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(alloc) })
	if err := os.Chmod(alloc, 0o755); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(alloc, "web")
	for dir, mode := range map[string]os.FileMode{
		task: 0o755, filepath.Join(task, "local"): 0o755, filepath.Join(task, "tmp"): 0o755,
		filepath.Join(task, "secrets"): 0o700, filepath.Join(alloc, "alloc"): 0o755,
		filepath.Join(alloc, "alloc", "data"): 0o755, filepath.Join(alloc, "alloc", "tmp"): 0o755,
	} {
		if err := os.MkdirAll(dir, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
	}
	tc.AllocDir, tc.TaskDir = alloc, task
	tc.StdoutPath, tc.StderrPath = filepath.Join(alloc, "stdout.log"), filepath.Join(alloc, "stderr.log")
}

// A task naming a user runs as that user and can write its own local/,
// secrets/ and tmp/ and the allocation's shared data/, but not the task
// directory holding the driver's exit file.
func TestUserWritesItsDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("running a task as another user needs root")
	}
	d := prodDriver(t, func(c *PluginConfig) { c.NoCgroups = true })
	tc := newTaskConfig(t, "alloc-1/web", "/bin/sh", "-c",
		"id -u; touch local/a secrets/b tmp/c ../alloc/data/d ../alloc/tmp/e && echo wrote; touch x 2>/dev/null || echo denied")
	newUserTaskDirs(t, tc)
	tc.User = "nobody"
	start(t, d, tc)
	if res := awaitExit(t, d, tc.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v; stderr %q", res, readFile(t, tc.GetStderrPath()))
	}
	if got := strings.Fields(readFile(t, tc.GetStdoutPath())); strings.Join(got, " ") != "65534 wrote denied" {
		t.Fatalf("stdout = %q; want uid 65534, its dirs written, the task dir refused; stderr %q", got, readFile(t, tc.GetStderrPath()))
	}
}

// Outside -dev a task runs as root only where denied_host_users allows
// it: naming root, or naming no user on a driver running as root, is
// refused at start, naming the user and the key.
func TestRootDeniedByDefault(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the driver's own user is root only when the test runs as root")
	}
	d := prodDriver(t, func(c *PluginConfig) { c.NoCgroups = true })
	for name, u := range map[string]string{"user root": "root", "no user": ""} {
		t.Run(name, func(t *testing.T) {
			tc := newTaskConfig(t, "alloc-1/root", "/bin/true")
			tc.User = u
			_, err := d.StartTask(testCtx(t), tc)
			if !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `"root"`) ||
				!strings.Contains(err.Error(), ConfigKeyDeniedHostUsers) {
				t.Fatalf("StartTask as root: %v; want refused naming root and %s", err, ConfigKeyDeniedHostUsers)
			}
		})
	}
	// A uid on the list denies whatever name maps to it.
	d = prodDriver(t, func(c *PluginConfig) { c.NoCgroups = true; c.DeniedHostUsers = []string{"65534"} })
	tc := newTaskConfig(t, "alloc-1/nobody", "/bin/true")
	tc.User = "nobody"
	if _, err := d.StartTask(testCtx(t), tc); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), `"nobody"`) {
		t.Fatalf("StartTask as a denied uid: %v", err)
	}
	// An empty list allows root.
	d = prodDriver(t, func(c *PluginConfig) { c.NoCgroups = true; c.DeniedHostUsers = []string{} })
	tc = newTaskConfig(t, "alloc-1/root-ok", "/bin/true")
	start(t, d, tc)
	if res := awaitExit(t, d, tc.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v", res)
	}
}

// Every start of a task gets a cgroup of its own: an earlier run's shim,
// removing its cgroup late (a loaded machine, a killed task), leaves the
// new run's cgroup and its limits in place.
func TestCgroupPerStart(t *testing.T) {
	h := needCgroups(t)
	res := cgroupResources{CPUMHz: 300, MemoryMB: 64}
	first, err := h.create("alloc-1/again", res)
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.create("alloc-1/again", res)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = second.destroy() }()
	for key, dir := range first.Dirs {
		if dir == second.Dirs[key] {
			t.Fatalf("two starts share the cgroup %s", dir)
		}
	}
	if err := first.destroy(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range second.Dirs {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the second start's cgroup after the first's removal: %v", err)
		}
	}
	if err := second.setLimits(res); err != nil {
		t.Errorf("the second start's limits after the first's removal: %v", err)
	}
}

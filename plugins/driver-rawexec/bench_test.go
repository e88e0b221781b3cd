package rawexec

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// benchExeEnvVar names a binary to run as the plugin's own executable in
// BenchmarkTaskLifecycle, e.g. a `go build ./cmd/drover` binary: the test
// binary is smaller than drover, so a shim re-executing it costs less than
// in production.
const benchExeEnvVar = "RAWEXEC_BENCH_EXE"

// BenchmarkTaskLifecycle starts, waits for and destroys /bin/true tasks the
// way the client runs a dispatched batch task (rotated logs, a cgroup where
// the host has one), one after the other, and reports the CPU time the
// driver's whole process tree spends per task: this process, its reaped
// descendants and the descendants still running (a supervisor).
func BenchmarkTaskLifecycle(b *testing.B) {
	d := New(testLogger())
	if exe := os.Getenv(benchExeEnvVar); exe != "" {
		d.shimExe, d.shimArgs = exe, []string{"__plugin", "driver-rawexec"}
	}
	ctx := context.Background()
	// The allocation directories are the client's work, made before the
	// CPU is counted.
	root := b.TempDir()
	allocDir := func(i int) string { return filepath.Join(root, strconv.Itoa(i)) }
	for i := -1; i < b.N; i++ {
		if err := os.MkdirAll(filepath.Join(allocDir(i), "logs"), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(allocDir(i), "task"), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	run := func(i int) {
		dir := filepath.Join(allocDir(i), "task")
		cfg := &driverpb.TaskConfig{
			Id:          fmt.Sprintf("alloc-%d/task", i),
			ConfigJson:  []byte(`{"command":"/bin/true"}`),
			Env:         map[string]string{"PATH": testPath},
			TaskDir:     dir,
			StdoutPath:  filepath.Join(dir, "..", "logs", "task.stdout"),
			StderrPath:  filepath.Join(dir, "..", "logs", "task.stderr"),
			LogRotation: &driverpb.LogRotation{MaxFiles: 10, MaxFileSizeBytes: 10 << 20},
		}
		if _, err := d.StartTask(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		res, err := d.WaitTask(ctx, cfg.GetId())
		if err != nil || res.GetExitCode() != 0 {
			b.Fatalf("exit %v, %v", res, err)
		}
		if err := d.DestroyTask(ctx, cfg.GetId(), false); err != nil {
			b.Fatal(err)
		}
	}
	run(-1) // warm up: a supervisor, if any, starts here
	before := treeCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(i)
	}
	b.StopTimer()
	cpu := treeCPU(b) - before
	b.ReportMetric(cpu/float64(b.N), "cpu-ms/task")
	d.letSupervisorGo()
}

// letSupervisorGo closes the link to an idle supervisor and waits for it
// to exit.
func (d *Driver) letSupervisorGo() {
	d.supMu.Lock()
	s := d.sup
	d.supMu.Unlock()
	if s != nil {
		d.closeIfIdle(s)
		<-s.dead
	}
}

// treeCPU returns the CPU milliseconds of this process, its reaped
// descendants and its live children with their reaped descendants.
func treeCPU(b *testing.B) float64 {
	b.Helper()
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatal(err)
	}
	ms := func(tv syscall.Timeval) float64 { return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3 }
	total := ms(self.Utime) + ms(self.Stime) + ms(children.Utime) + ms(children.Stime)
	threads, _ := filepath.Glob("/proc/self/task/*/children")
	for _, f := range threads {
		data, _ := os.ReadFile(f)
		for _, p := range strings.Fields(string(data)) {
			stat, err := os.ReadFile("/proc/" + p + "/stat")
			if err != nil {
				continue
			}
			fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			// utime, stime, cutime, cstime are fields 14-17: fields[11:15].
			for _, v := range fields[11:15] {
				n, _ := strconv.ParseUint(v, 10, 64)
				total += float64(n) * 1000 / clockTicks
			}
		}
	}
	return total
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; 100 on every
// Linux architecture Go supports.
const clockTicks = 100

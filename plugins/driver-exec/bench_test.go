package execdriver

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkInitOverhead measures what the exec driver adds to a task's
// start and end: the two init stages (namespaces, the root's mounts,
// pivot_root, the capability drop) around /bin/true, against /bin/true
// run plainly as raw_exec's supervisor would. It reports the CPU time of
// the process tree (user+system of the started process and every
// descendant it waited for), which a loaded machine does not inflate as
// it does wall time.
func BenchmarkInitOverhead(b *testing.B) {
	d := New(nil, nil)
	if reason := d.unavailable(); reason != "" {
		b.Skip(reason)
	}
	root := b.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, dir := range []string{"alloc/data", "web/local", "web/tmp", "web/secrets"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	spec := initSpec{
		Root: filepath.Join(root, "web"), AllocShared: filepath.Join(root, "alloc"), Binds: chrootEnv,
		Path: "/bin/true", WorkDir: "/", Env: []string{"PATH=/usr/bin:/bin"},
		UID: 65534, GID: 65534, Caps: defaultCaps,
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		cmd  func() *exec.Cmd
	}{
		{"plain", func() *exec.Cmd { return exec.Command("/bin/true") }},
		{"exec-init", func() *exec.Cmd {
			c := exec.Command(exe, "-test.run=^$")
			c.Env = []string{InitEnvVar + "=" + string(raw)}
			return c
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var cpu time.Duration
			for b.Loop() {
				c := bc.cmd()
				if out, err := c.CombinedOutput(); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/op")
		})
	}
}

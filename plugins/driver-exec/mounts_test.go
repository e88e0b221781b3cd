package execdriver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/driver/drivertest"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestVolumeMountsChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *driverpb.Mount
		want string // "" when accepted
	}{
		{"absolute", &driverpb.Mount{HostPath: "/srv", TaskPath: "/data"}, ""},
		{"relative destination", &driverpb.Mount{HostPath: "/srv", TaskPath: "local/data"}, ""},
		{"relative host path", &driverpb.Mount{HostPath: "srv", TaskPath: "/data"}, "must be absolute"},
		{"root", &driverpb.Mount{HostPath: "/srv", TaskPath: "/"}, "inside the task's root"},
		{"dot dot", &driverpb.Mount{HostPath: "/srv", TaskPath: "/data/../../x"}, "without .."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := volumeMounts(&driverpb.TaskConfig{Mounts: []*driverpb.Mount{tc.m}})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("volumeMounts = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestHostVolumeMounts: an exec task sees its host volumes at their
// destinations in its root: it writes into a read-write one (the file is
// in the host directory) and not into a read-only one; no mount is left on
// the host.
func TestHostVolumeMounts(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	c := drivertest.Connect(t, d)
	rw, ro := t.TempDir(), t.TempDir()
	if err := os.Chmod(rw, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "seed"), []byte("seed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `echo hello > /data/out && cat /srv/config/seed && if touch /srv/config/w 2>/dev/null; then echo WROTE; else echo REFUSED; fi`
	cfg := taskConfig(t, "a1/vol", script)
	cfg.Mounts = []*driverpb.Mount{
		{HostPath: rw, TaskPath: "/data"},
		{HostPath: ro, TaskPath: "/srv/config", ReadOnly: true},
	}
	if _, err := c.StartTask(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, c, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit %v; stderr %s", res, read(t, cfg.GetStderrPath()))
	}
	if got := read(t, filepath.Join(rw, "out")); got != "hello\n" {
		t.Errorf("host volume file = %q", got)
	}
	eventually(t, "the task's output", func() bool { return strings.Contains(read(t, cfg.GetStdoutPath()), "seed") })
	if out := read(t, cfg.GetStdoutPath()); !strings.Contains(out, "REFUSED") {
		t.Errorf("output %q: the read-only volume took a write", out)
	}
	if _, err := os.Stat(filepath.Join(ro, "w")); err == nil {
		t.Error("the read-only volume was written")
	}
	if m := hostMounts(t, cfg.GetAllocDir()); len(m) != 0 {
		t.Errorf("mounts left on the host beneath the allocation: %v", m)
	}
}

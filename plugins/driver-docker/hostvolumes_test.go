package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestVolumeBinds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mount *driverpb.Mount
		want  string // the bind, or the error's text
		err   bool
	}{
		{"read-write", &driverpb.Mount{HostPath: "/srv/data", TaskPath: "/data"}, "/srv/data:/data:rprivate", false},
		{"read-only", &driverpb.Mount{HostPath: "/srv/data/", TaskPath: "/data", ReadOnly: true}, "/srv/data:/data:ro,rprivate", false},
		{"relative destination", &driverpb.Mount{HostPath: "/srv/data", TaskPath: "data"}, "/srv/data:/data:rprivate", false},
		{"host-to-task", &driverpb.Mount{HostPath: "/srv", TaskPath: "/d", PropagationMode: "host-to-task"}, "/srv:/d:rslave", false},
		{"bidirectional", &driverpb.Mount{HostPath: "/srv", TaskPath: "/d", PropagationMode: "bidirectional"}, "/srv:/d:rshared", false},
		{"relative host path", &driverpb.Mount{HostPath: "srv", TaskPath: "/d"}, "must be absolute", true},
		{"colon", &driverpb.Mount{HostPath: "/srv", TaskPath: "/d:/x"}, "not a usable container path", true},
		{"root", &driverpb.Mount{HostPath: "/srv", TaskPath: "/"}, "not a usable container path", true},
		{"bad propagation", &driverpb.Mount{HostPath: "/srv", TaskPath: "/d", PropagationMode: "both"}, `propagation_mode "both"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := volumeBinds(&driverpb.TaskConfig{Mounts: []*driverpb.Mount{tc.mount}})
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tc.want)
				}
				return
			}
			if err != nil || len(got) != 1 || got[0] != tc.want {
				t.Fatalf("got %v, %v; want [%s]", got, err, tc.want)
			}
		})
	}
}

// A docker task sees its host volumes at their destinations: it writes
// into a read-write one (the file lands in the host directory) and a
// write into a read-only one is refused.
func TestEngineHostVolumes(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	rw, ro := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "seed"), []byte("seed"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `echo hello > /data/out && cat /config/seed && if echo x > /config/w 2>/dev/null; then echo WROTE; else echo REFUSED; fi`
	cfg := shTask(t, "web", script)
	cfg.Mounts = []*driverpb.Mount{
		{HostPath: rw, TaskPath: "/data"},
		{HostPath: ro, TaskPath: "/config", ReadOnly: true},
	}
	ctx := ctxFor(t, 2*time.Minute)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, h.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("wait: %v %v (log %q)", res, err, readLog(t, cfg.GetStdoutPath()))
	}
	if b, err := os.ReadFile(filepath.Join(rw, "out")); err != nil || string(b) != "hello\n" {
		t.Fatalf("host volume file: %q, %v", b, err)
	}
	var out string
	waitFor(t, time.Minute, "the task's output", func() bool {
		out = readLog(t, cfg.GetStdoutPath())
		return strings.Contains(out, "REFUSED") || strings.Contains(out, "WROTE")
	})
	if !strings.Contains(out, "seed") || !strings.Contains(out, "REFUSED") {
		t.Fatalf("output %q: want the seed read and the write refused", out)
	}
	if _, err := os.Stat(filepath.Join(ro, "w")); err == nil {
		t.Fatal("the read-only volume was written")
	}
}

package docker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/safefs"
)

// A task that plants /alloc/logs/<task>.stdout.1..4 as symlinks to a host
// file and then prints more than max_file_size does not get the host file
// written by the driver's log rotation: its content and mtime stay, and
// the output lands in regular log files.
func TestEngineLogRotationIgnoresPlantedLinks(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	host := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(host, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(host, old, old); err != nil {
		t.Fatal(err)
	}
	script := `for i in 1 2 3 4; do ln -sf ` + host + ` /alloc/logs/web.stdout.$i; done; ` +
		`i=0; while [ $i -lt 200 ]; do echo "line $i of the task's output, long enough to rotate"; i=$((i+1)); done`
	cfg := shTask(t, "web", script)
	cfg.LogRotation = &driverpb.LogRotation{MaxFiles: 10, MaxFileSizeBytes: 1024}
	ctx := ctxFor(t, 2*time.Minute)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, h.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("wait: %v %v", res, err)
	}
	var all strings.Builder
	waitFor(t, time.Minute, "the whole output in the log files", func() bool {
		all.Reset()
		for i := 0; i < 20; i++ {
			b, err := os.ReadFile(cfg.GetStdoutPath() + "." + strconv.Itoa(i))
			if err == nil {
				all.Write(b)
			}
		}
		return strings.Contains(all.String(), "line 199 of")
	})
	b, err := os.ReadFile(host)
	fi, serr := os.Stat(host)
	if err != nil || serr != nil || string(b) != "host secret" || !fi.ModTime().Equal(old) {
		t.Fatalf("host file written through the task's links: %q (%v), mtime %v (%v)", b, err, fi.ModTime(), serr)
	}
}

// A bind source beneath the alloc dir that a task replaced by a symlink to
// a host directory (before a restart) is refused, naming it: the host
// directory is never bound into the container. The source's parent (local/
// or alloc/) is the task's to write.
func TestEngineBindSourceRefusesSymlink(t *testing.T) {
	needEngine(t)
	for _, c := range []struct{ name, volume, link string }{
		{"local", "local/data:/data", "local/data"},
		{"shared", "../alloc/data:/data", "../alloc/data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newEngineDriver(t, "")
			hostDir := t.TempDir()
			if err := os.WriteFile(filepath.Join(hostDir, "secret"), []byte("host secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := newEngineTask(t, "web", busyboxImage, fmt.Sprintf(`{"image":%q,"command":"sh","args":["-c","cat /data/secret; ls /data"],"volumes":[%q]}`, busyboxImage, c.volume))
			link := filepath.Join(cfg.GetTaskDir(), c.link)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(hostDir, link); err != nil {
				t.Fatal(err)
			}
			ctx := ctxFor(t, time.Minute)
			_, err := d.StartTask(ctx, cfg)
			if err == nil {
				destroyAfter(t, d, cfg.GetId())
				_, _ = d.WaitTask(ctx, cfg.GetId())
				t.Fatalf("started with a symlinked bind source; stdout %q", readLog(t, cfg.GetStdoutPath()))
			}
			if !errors.Is(err, safefs.ErrUnsafePath) || !strings.Contains(err.Error(), filepath.Clean(link)) {
				t.Errorf("StartTask = %v; want an unsafe-path refusal naming %s", err, filepath.Clean(link))
			}
		})
	}
}

// A staged bind source stays the directory that was checked: a task that
// swaps the source for a link to a host directory after the check cannot
// redirect the engine's mount, and no staging mount outlives the start.
func TestPinBindsStagesCheckedDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("staging bind mounts need root")
	}
	alloc := t.TempDir()
	for _, dir := range []string{"alloc/data", "web/local/cfg"} {
		if err := os.MkdirAll(filepath.Join(alloc, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(alloc, dir, "mine"), []byte(dir), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &driverpb.TaskConfig{AllocDir: alloc, TaskDir: filepath.Join(alloc, "web")}
	in := []string{
		filepath.Join(alloc, "alloc") + ":/alloc",
		filepath.Join(alloc, "web/local") + ":/local",
		filepath.Join(alloc, "alloc/data") + ":/data",
		filepath.Join(alloc, "web/local/cfg") + ":/cfg:ro",
		"/etc:/hostetc",
	}
	out, release, err := pinBinds(cfg, in)
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	// Sources no task can swap are given as they are; the others staged.
	for i, want := range []string{in[0], in[1], "", "", in[4]} {
		if want != "" && out[i] != want {
			t.Errorf("bind %d = %s, want %s", i, out[i], want)
		}
		if want == "" && !strings.Contains(out[i], "/web/"+stagingDirName+"/") {
			t.Errorf("bind %d = %s, want a staged source", i, out[i])
		}
	}
	// The task swaps the checked sources for links to a host directory.
	for _, dir := range []string{"alloc/data", "web/local/cfg"} {
		p := filepath.Join(alloc, dir)
		if err := os.Rename(p, p+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(hostDir, p); err != nil {
			t.Fatal(err)
		}
	}
	for i, dir := range map[int]string{2: "alloc/data", 3: "web/local/cfg"} {
		src, _, _ := strings.Cut(out[i], ":")
		if b, err := os.ReadFile(filepath.Join(src, "mine")); err != nil || string(b) != dir {
			t.Errorf("staged %s reads %q, %v; want the checked directory", src, b, err)
		}
		if _, err := os.Stat(filepath.Join(src, "secret")); err == nil {
			t.Errorf("staged %s shows the host directory", src)
		}
	}
	release()
	released = true
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), filepath.Join(alloc, "web", stagingDirName)) {
		t.Errorf("staging mounts left after release:\n%s", mi)
	}
}

// A container keeps its staged binds after the staging is undone: a task
// that reads its bind only once StartTask returned still sees the source.
func TestEngineStagedBindOutlivesStaging(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	cfg := newEngineTask(t, "web", busyboxImage, fmt.Sprintf(`{"image":%q,"command":"sh",
		"args":["-c","while [ ! -e /alloc/go ]; do sleep 0.05; done; cat /cfg/app.conf /data/f"],
		"volumes":["local/cfg:/cfg:ro","../alloc/data:/data"]}`, busyboxImage))
	for dir, content := range map[string]string{"local/cfg/app.conf": "port=8080\n", "../alloc/data/f": "shared\n"} {
		p := filepath.Join(cfg.GetTaskDir(), dir)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxFor(t, time.Minute)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), filepath.Join(cfg.GetTaskDir(), stagingDirName)) {
		t.Errorf("staging mounts left after StartTask")
	}
	if err := os.WriteFile(filepath.Join(cfg.GetAllocDir(), "alloc/go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("WaitTask = %v, %v (stderr %q)", res, err, readLog(t, cfg.GetStderrPath()))
	}
	if out := readLog(t, cfg.GetStdoutPath()); out != "port=8080\nshared\n" {
		t.Errorf("task output = %q", out)
	}
}

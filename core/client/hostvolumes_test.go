package client

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/core/internal/proctest"
	"github.com/drover-org/drover/core/structs"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// newHostVolClient is a raw_exec client with host volumes.
func newHostVolClient(t *testing.T, srv *fakeServer, stateDir string, vols map[string]*structs.ClientHostVolumeConfig, extra ...fakeProvider) *Client {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("host volumes are bind mounts: needs root")
	}
	d := newRawExec(t)
	proctest.KillUnder(t, stateDir)
	drivers := fakeProvider{rawexec.Name: d}
	for _, p := range extra {
		for k, v := range p {
			drivers[k] = v
		}
	}
	c, err := New(Config{
		StateDir: stateDir, Server: srv, Drivers: drivers, HostVolumes: vols,
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond, LogPollInterval: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// hostVolJob is a job whose group asks for host volumes (name → source,
// read-only) and whose task mounts each at /<name>.
func hostVolJob(jobType string, task *structs.Task, vols map[string]*structs.VolumeRequest) *structs.Job {
	for name, v := range vols {
		v.Name, v.Type = name, structs.VolumeTypeHost
		task.VolumeMounts = append(task.VolumeMounts, &structs.VolumeMount{Volume: name, Destination: "/" + name, ReadOnly: v.ReadOnly})
	}
	j := testJob(jobType, task)
	j.TaskGroups[0].Volumes = vols
	return j
}

// A raw_exec task finds its host volumes at <task dir>/<destination>: it
// writes into the read-write one (the file lands in the host directory),
// its write into the read-only one is refused. The node reports the
// volumes; once the alloc is done the binds are gone and, with the alloc
// dir collected, the host directories keep their files.
func TestHostVolumesRawExec(t *testing.T) {
	shared, certs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(certs, "ca.pem"), []byte("CA"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer()
	c := newHostVolClient(t, srv, t.TempDir(), map[string]*structs.ClientHostVolumeConfig{
		"shared": {Path: shared}, "certs": {Path: certs, ReadOnly: true},
	})
	defer c.Shutdown()
	waitFor(t, "registered", func() bool { return srv.node(c.NodeID()) != nil })
	hv := srv.node(c.NodeID()).HostVolumes
	if len(hv) != 2 || hv["shared"].Path != shared || hv["shared"].Name != "shared" || hv["shared"].ReadOnly || !hv["certs"].ReadOnly {
		t.Fatalf("node HostVolumes = %+v", hv)
	}

	task := rawTask("w", "/bin/sh", "-c", `cd "$NOMAD_TASK_DIR/.." && echo written > data/out && cat config/ca.pem > data/copy && `+
		`if echo x > config/w 2>/dev/null; then echo WROTE > data/verdict; else echo REFUSED > data/verdict; fi`)
	job := hostVolJob("batch", task, map[string]*structs.VolumeRequest{
		"data": {Source: "shared"}, "config": {Source: "certs", ReadOnly: true},
	})
	srv.upsert(testAlloc("hv-1", c.NodeID(), job))
	waitFor(t, "alloc complete", func() bool { return srv.clientStatus("hv-1") == structs.AllocClientStatusComplete })
	for file, want := range map[string]string{"out": "written\n", "copy": "CA", "verdict": "REFUSED\n"} {
		if b, err := os.ReadFile(filepath.Join(shared, file)); err != nil || string(b) != want {
			t.Errorf("%s in the host volume = %q, %v; want %q", file, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(certs, "w")); err == nil {
		t.Error("the read-only volume was written")
	}
	taskDir := filepath.Join(c.cfg.AllocDir, "hv-1", "w")
	waitFor(t, "binds released", func() bool {
		return !isMounted(t, filepath.Join(taskDir, "data")) && !isMounted(t, filepath.Join(taskDir, "config"))
	})
	srv.remove("hv-1")
	waitFor(t, "alloc dir removed", func() bool {
		_, err := os.Stat(filepath.Join(c.cfg.AllocDir, "hv-1"))
		return os.IsNotExist(err)
	})
	if b, err := os.ReadFile(filepath.Join(shared, "out")); err != nil || string(b) != "written\n" {
		t.Fatalf("the host volume lost its file with the alloc dir: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(certs, "ca.pem")); err != nil || string(b) != "CA" {
		t.Fatalf("the read-only volume lost its file: %q, %v", b, err)
	}
}

// An alloc asking for a host volume this client does not have (the node
// changed its config since placement) fails before any task starts, with
// a setup failure naming the volume.
func TestHostVolumeMissingFailsAlloc(t *testing.T) {
	srv := newFakeServer()
	c := newHostVolClient(t, srv, t.TempDir(), nil)
	defer c.Shutdown()
	job := hostVolJob("batch", rawTask("w", "/bin/true"), map[string]*structs.VolumeRequest{"data": {Source: "nope"}})
	srv.upsert(testAlloc("hv-2", c.NodeID(), job))
	waitFor(t, "alloc failed", func() bool { return srv.clientStatus("hv-2") == structs.AllocClientStatusFailed })
	ts := srv.alloc("hv-2").TaskStates["w"]
	var msg string
	for _, e := range ts.Events {
		if e.Type == structs.TaskSetupFailure {
			msg = e.DisplayMessage + e.SetupError + e.Message
		}
	}
	if !strings.Contains(msg, `"nope"`) {
		t.Fatalf("events %+v: want a setup failure naming the host volume", ts.Events)
	}
}

// A client restarted while a task has a host volume bound keeps the bind
// (the task goes on using it) and unbinds it when the alloc stops.
func TestHostVolumeReleasedAfterClientRestart(t *testing.T) {
	shared := t.TempDir()
	vols := map[string]*structs.ClientHostVolumeConfig{"shared": {Path: shared}}
	srv := newFakeServer()
	dir := t.TempDir()
	c1 := newHostVolClient(t, srv, dir, vols)
	job := hostVolJob("service", rawTask("s", "/bin/sh", "-c", `echo up > "$NOMAD_TASK_DIR/../data/up"; exec sleep 600`),
		map[string]*structs.VolumeRequest{"data": {Source: "shared"}})
	srv.upsert(testAlloc("hv-3", c1.NodeID(), job))
	waitFor(t, "task wrote to the volume", func() bool {
		_, err := os.Stat(filepath.Join(shared, "up"))
		return err == nil
	})
	var pid int
	waitFor(t, "the task's handle", func() bool {
		_, h := c1.runner("hv-3").task("s").snapshot()
		pid = int(h.GetPid())
		return pid > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	bind := filepath.Join(c1.cfg.AllocDir, "hv-3", "s", "data")
	c1.Shutdown()
	if !isMounted(t, bind) {
		t.Fatal("the client's shutdown took the task's host volume away")
	}

	c2 := newHostVolClient(t, srv, dir, vols)
	defer c2.Shutdown()
	waitFor(t, "task recovered", func() bool {
		r := c2.runner("hv-3")
		if r == nil {
			return false
		}
		st, h := r.task("s").snapshot()
		return st.State == structs.TaskStateRunning && h != nil
	})
	if !isMounted(t, bind) {
		t.Fatal("the restored alloc lost its bind")
	}
	srv.setDesired("hv-3", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped", func() bool { return srv.clientStatus("hv-3") == structs.AllocClientStatusComplete })
	waitFor(t, "bind released by the new client", func() bool { return !isMounted(t, bind) })
	if _, err := os.Stat(filepath.Join(shared, "up")); err != nil {
		t.Fatalf("the host volume lost its file: %v", err)
	}
}

// The driver gets the task's host volume mounts (docker binds them at the
// destination): the host path, the destination and read-only as the
// client's volume, the request or the mount make it.
func TestHostVolumeDriverMounts(t *testing.T) {
	shared, certs := t.TempDir(), t.TempDir()
	w := newFakeWorld()
	srv := newFakeServer()
	c := newHostVolClient(t, srv, t.TempDir(), map[string]*structs.ClientHostVolumeConfig{
		"shared": {Path: shared}, "certs": {Path: certs, ReadOnly: true},
	}, fakeProvider{"fake": newFakeDriver(w)})
	defer c.Shutdown()
	task := fakeTaskSpec("app", `{}`)
	task.VolumeMounts = []*structs.VolumeMount{
		{Volume: "data", Destination: "/srv/data", PropagationMode: "host-to-task"},
		{Volume: "config", Destination: "local/config"},
	}
	job := testJob("service", task)
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{
		"data": {Name: "data", Type: "host", Source: "shared"}, "config": {Name: "config", Type: "host", Source: "certs"},
	}
	a := testAlloc("hv-4", c.NodeID(), job)
	srv.upsert(a)
	waitFor(t, "running", func() bool { return srv.clientStatus("hv-4") == structs.AllocClientStatusRunning })
	cfg := w.config(c.runner("hv-4").task("app").id)
	got := map[string]*driverpb.Mount{}
	for _, m := range cfg.GetMounts() {
		got[m.GetTaskPath()] = m
	}
	if m := got["/srv/data"]; m == nil || m.GetHostPath() != shared || m.GetReadOnly() || m.GetPropagationMode() != "host-to-task" {
		t.Errorf("data mount = %v", m)
	}
	if m := got["local/config"]; m == nil || m.GetHostPath() != certs || !m.GetReadOnly() || m.GetPropagationMode() != "private" {
		t.Errorf("config mount = %v (the client's volume is read-only)", m)
	}
	srv.setDesired("hv-4", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped", func() bool { return srv.clientStatus("hv-4") == structs.AllocClientStatusComplete })
	taskDir := filepath.Join(c.cfg.AllocDir, "hv-4", "app")
	waitFor(t, "binds released", func() bool {
		return !isMounted(t, filepath.Join(taskDir, "srv/data")) && !isMounted(t, filepath.Join(taskDir, "local/config"))
	})
}

// mountsBeneath finds a mount beneath a directory, a path with a space
// too (mountinfo escapes it), and nothing beside it.
func TestMountsBeneath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	dir, src := t.TempDir(), t.TempDir()
	target := filepath.Join(dir, "task dir", "data")
	if err := os.MkdirAll(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if ms, err := mountsBeneath(dir); err != nil || len(ms) != 0 {
		t.Fatalf("before the mount: %v, %v", ms, err)
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(target, syscall.MNT_DETACH) })
	if ms, err := mountsBeneath(dir); err != nil || len(ms) != 1 || ms[0] != target {
		t.Fatalf("mountsBeneath = %v, %v; want [%s]", ms, err, target)
	}
	if ms, err := mountsBeneath(dir + "x"); err != nil || len(ms) != 0 {
		t.Fatalf("a sibling's mounts: %v, %v", ms, err)
	}
}

// A per_alloc host volume is the one named after the allocation's index:
// allocation 1 of the group gets "data[1]".
func TestHostVolumePerAlloc(t *testing.T) {
	d0, d1 := t.TempDir(), t.TempDir()
	w := newFakeWorld()
	srv := newFakeServer()
	c := newHostVolClient(t, srv, t.TempDir(), map[string]*structs.ClientHostVolumeConfig{
		"data[0]": {Path: d0}, "data[1]": {Path: d1},
	}, fakeProvider{"fake": newFakeDriver(w)})
	defer c.Shutdown()
	task := fakeTaskSpec("app", `{}`)
	task.VolumeMounts = []*structs.VolumeMount{{Volume: "data", Destination: "/data"}}
	job := testJob("service", task)
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: "host", Source: "data", PerAlloc: true}}
	a := testAlloc("hv-5", c.NodeID(), job)
	a.Name = structs.AllocName(job.ID, "web", 1)
	srv.upsert(a)
	waitFor(t, "running", func() bool { return srv.clientStatus("hv-5") == structs.AllocClientStatusRunning })
	ms := w.config(c.runner("hv-5").task("app").id).GetMounts()
	if len(ms) != 1 || ms[0].GetHostPath() != d1 {
		t.Fatalf("mounts = %v, want data[1]'s %s", ms, d1)
	}
	bind := filepath.Join(c.cfg.AllocDir, "hv-5", "app", "data")
	if !isMounted(t, bind) {
		t.Fatal("the per_alloc volume is not bound into the task dir")
	}
	srv.setDesired("hv-5", structs.AllocDesiredStatusStop)
	waitFor(t, "bind released", func() bool {
		return srv.clientStatus("hv-5") == structs.AllocClientStatusComplete && !isMounted(t, bind)
	})
}

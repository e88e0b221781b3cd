package client

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// newTestClient starts a client over srv and the fake driver world.
func newTestClient(t *testing.T, srv *fakeServer, world *fakeWorld, stateDir string) *Client {
	t.Helper()
	c, err := New(Config{
		StateDir:            stateDir,
		Server:              srv,
		Drivers:             fakeProvider{"fake": newFakeDriver(world)},
		Meta:                map[string]string{"rack": "r1"},
		UpdateBatchInterval: 5 * time.Millisecond,
		RetryInterval:       5 * time.Millisecond,
		MaxRetryInterval:    20 * time.Millisecond,
		LogPollInterval:     5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	select {
	case <-c.Registered():
	case <-time.After(testTimeout):
		t.Fatal("client did not register")
	}
	return c
}

func TestNewValidatesConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no server":    {StateDir: t.TempDir()},
		"no state dir": {Server: newFakeServer()},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v; want ErrInvalidConfig", name, err)
		}
	}
}

func TestClientIdentityPersists(t *testing.T) {
	dir := t.TempDir()
	c1, err := New(Config{StateDir: dir, Server: newFakeServer()})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := New(Config{StateDir: dir, Server: newFakeServer()})
	if err != nil {
		t.Fatal(err)
	}
	if c1.NodeID() == "" || c1.NodeID() != c2.NodeID() || c1.Node().SecretID != c2.Node().SecretID {
		t.Fatalf("identity changed across restarts: %s/%s vs %s/%s",
			c1.NodeID(), c1.Node().SecretID, c2.NodeID(), c2.Node().SecretID)
	}
	b, err := os.ReadFile(filepath.Join(dir, "node-id"))
	if err != nil || string(b) != c1.NodeID()+"\n" {
		t.Fatalf("node-id file = %q, %v", b, err)
	}
	c3, err := New(Config{StateDir: dir, Server: newFakeServer(), NodeID: "fixed-id"})
	if err != nil {
		t.Fatal(err)
	}
	if c3.NodeID() != "fixed-id" {
		t.Fatalf("NodeID = %q; want the configured one", c3.NodeID())
	}
}

func TestClientRegistersAndHeartbeats(t *testing.T) {
	srv := newFakeServer()
	srv.ttl = 40 * time.Millisecond
	c := newTestClient(t, srv, newFakeWorld(), t.TempDir())

	n := srv.node(c.NodeID())
	if n.Status != structs.NodeStatusReady {
		t.Fatalf("status after first heartbeat = %q; want ready", n.Status)
	}
	if n.Datacenter != "dc1" || n.NodePool != "default" || n.Meta["rack"] != "r1" || n.Name == "" {
		t.Fatalf("node = dc %q pool %q meta %v name %q", n.Datacenter, n.NodePool, n.Meta, n.Name)
	}
	for _, k := range []string{"cpu.numcores", "cpu.totalcompute", "memory.totalbytes", "kernel.name", "kernel.version",
		"cpu.arch", "os.name", "unique.hostname", "drover.version", "nomad.version", "driver.fake"} {
		if n.Attributes[k] == "" {
			t.Errorf("attribute %s missing", k)
		}
	}
	if d := n.Drivers["fake"]; d == nil || !d.Detected || !d.Healthy {
		t.Fatalf("Drivers[fake] = %+v; want detected and healthy", d)
	}
	if n.NodeResources.Cpu.CpuShares <= 0 || n.NodeResources.Memory.MemoryMB <= 0 || n.NodeResources.Disk.DiskMB <= 0 {
		t.Fatalf("resources = %+v", n.NodeResources)
	}
	if n.ComputedClass == "" {
		t.Error("no computed class")
	}

	// Heartbeats continue at about half the TTL.
	_, beats := srv.counts()
	waitFor(t, "more heartbeats", func() bool { _, b := srv.counts(); return b >= beats+3 })

	// A server that forgot the node gets it registered again.
	regs, _ := srv.counts()
	srv.mu.Lock()
	srv.forget = true
	srv.mu.Unlock()
	waitFor(t, "re-registration", func() bool { r, _ := srv.counts(); return r > regs })
	waitFor(t, "ready again", func() bool {
		n := srv.node(c.NodeID())
		return n != nil && n.Status == structs.NodeStatusReady
	})
}

func TestClientRunsStopsAndDestroysAllocs(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())

	// A batch alloc that exits 0 completes.
	batch := testAlloc("batch-1", c.NodeID(), testJob("batch", fakeTaskSpec("main", `{"exit_code": 0}`)))
	srv.upsert(batch)
	waitFor(t, "batch alloc complete", func() bool { return srv.clientStatus("batch-1") == structs.AllocClientStatusComplete })
	if ts := srv.alloc("batch-1").TaskStates["main"]; ts == nil || ts.State != structs.TaskStateDead {
		t.Fatalf("server task state = %+v", ts)
	}

	// A service alloc runs until the server stops it.
	svc := testAlloc("svc-1", c.NodeID(), testJob("service", fakeTaskSpec("main", `{}`)))
	srv.upsert(svc)
	waitFor(t, "service alloc running", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusRunning })
	allocDir := filepath.Join(c.cfg.AllocDir, "svc-1")
	if _, err := os.Stat(filepath.Join(allocDir, "main", "local")); err != nil {
		t.Fatalf("task dir: %v", err)
	}
	srv.setDesired("svc-1", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped alloc complete", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusComplete })
	if world.running("svc-1/main") {
		t.Fatal("task still runs after the alloc stopped")
	}
	ts := srv.alloc("svc-1").TaskStates["main"]
	if ts.State != structs.TaskStateDead || ts.Failed {
		t.Fatalf("stopped task = %+v; want dead, not failed", ts)
	}

	// The server forgets the alloc: its runner, dir and state go away.
	srv.remove("svc-1")
	waitFor(t, "alloc dir removed", func() bool {
		_, err := os.Stat(allocDir)
		return errors.Is(err, os.ErrNotExist)
	})
	waitFor(t, "alloc state removed", func() bool {
		// What a restart would read, from disk.
		l, err := openAllocLog(c.cfg.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		_, ok := l.live()["svc-1"]
		return !ok
	})
	if c.runner("svc-1") != nil {
		t.Fatal("runner of a removed alloc still tracked")
	}

	// An alloc already stopped by the server is never started.
	stopped := testAlloc("stopped-1", c.NodeID(), testJob("service", fakeTaskSpec("other", `{}`)))
	stopped.DesiredStatus = structs.AllocDesiredStatusStop
	srv.upsert(stopped)
	marker := testAlloc("marker-1", c.NodeID(), testJob("batch", fakeTaskSpec("marker", `{"exit_code": 0}`)))
	srv.upsert(marker)
	waitFor(t, "marker alloc complete", func() bool { return srv.clientStatus("marker-1") == structs.AllocClientStatusComplete })
	if n := world.startCount("other"); n != 0 || c.runner("stopped-1") != nil {
		t.Fatalf("stopped alloc was started (%d starts)", n)
	}
}

func TestClientRestoresRunningTasks(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	dir := t.TempDir()

	c1, err := New(Config{StateDir: dir, Server: srv, Drivers: fakeProvider{"fake": newFakeDriver(world)},
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Start(); err != nil {
		t.Fatal(err)
	}
	alloc := testAlloc("svc-1", c1.NodeID(), testJob("service", fakeTaskSpec("main", `{}`)))
	srv.upsert(alloc)
	waitFor(t, "running", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusRunning })
	c1.Shutdown()
	if !world.running("svc-1/main") {
		t.Fatal("client shutdown killed the task; it must outlive the client")
	}

	// A new client process with a new driver process reattaches.
	c2 := newTestClient(t, srv, world, dir)
	r := c2.runner("svc-1")
	if r == nil {
		t.Fatal("alloc not restored")
	}
	waitFor(t, "restored task running", func() bool {
		st, h := r.task("main").snapshot()
		return st.State == structs.TaskStateRunning && h != nil
	})
	if n := world.startCount("main"); n != 1 {
		t.Fatalf("task started %d times; want 1 (recovered, not restarted)", n)
	}
	world.finish("svc-1/main", 0)
	// A service task that exits is restarted per policy (attempts 0 here,
	// so it fails), proving the restored runner still supervises it.
	waitFor(t, "restored alloc reaches a terminal status", func() bool {
		return srv.clientStatus("svc-1") == structs.AllocClientStatusFailed
	})
}

func TestClientRestoredTaskLostIsAFailure(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	dir := t.TempDir()
	c1, err := New(Config{StateDir: dir, Server: srv, Drivers: fakeProvider{"fake": newFakeDriver(world)},
		UpdateBatchInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Start(); err != nil {
		t.Fatal(err)
	}
	srv.upsert(testAlloc("svc-1", c1.NodeID(), testJob("service", fakeTaskSpec("main", `{}`))))
	waitFor(t, "running", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusRunning })
	c1.Shutdown()

	// The node "rebooted": the task is gone.
	world.mu.Lock()
	delete(world.tasks, "svc-1/main")
	world.mu.Unlock()

	c2 := newTestClient(t, srv, world, dir)
	waitFor(t, "lost task handled", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusFailed })
	st, _ := c2.runner("svc-1").task("main").snapshot()
	found := false
	for _, e := range st.Events {
		found = found || e.Type == structs.TaskRestoreFailed
	}
	if !found {
		t.Fatalf("events = %v; want %s", eventTypes(st), structs.TaskRestoreFailed)
	}
}

package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// runningAlloc starts a client with one service alloc of one fake task
// "web" and waits for it to run.
func runningAlloc(t *testing.T, cfg func(*Config)) (*Client, *fakeServer, *fakeWorld, string) {
	t.Helper()
	srv, world := newFakeServer(), newFakeWorld()
	c := newTestClientCfg(t, srv, world, t.TempDir(), cfg)
	a := testAlloc("svc-1", c.NodeID(), testJob("service", fakeTaskSpec("web", `{}`)))
	srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusRunning })
	return c, srv, world, filepath.Join(c.cfg.AllocDir, "svc-1")
}

// newTestClientCfg is newTestClient with a change to its config.
func newTestClientCfg(t *testing.T, srv *fakeServer, world *fakeWorld, stateDir string, change func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		StateDir:            stateDir,
		Server:              srv,
		Drivers:             fakeProvider{"fake": newFakeDriver(world)},
		Meta:                map[string]string{"rack": "r1"},
		UpdateBatchInterval: 5 * time.Millisecond,
		RetryInterval:       5 * time.Millisecond,
		MaxRetryInterval:    20 * time.Millisecond,
		LogPollInterval:     5 * time.Millisecond,
	}
	if change != nil {
		change(&cfg)
	}
	c, err := New(cfg)
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

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: err = %v; want kind %v", what, err, kind)
	}
}

// TestAllocFSRefusesTaskSymlinks: a task that planted symlinks in the
// directories it can write (to /etc/shadow, to a parent of the alloc
// dir, to /) gets refusals through every fs call, never the host's files;
// "..", secrets and FIFOs are refused; "/" is the alloc dir's root.
func TestAllocFSRefusesTaskSymlinks(t *testing.T) {
	c, _, _, dir := runningAlloc(t, nil)
	mustWrite(t, filepath.Join(dir, "alloc/data/f.txt"), "hello, world")
	mustWrite(t, filepath.Join(dir, "web/secrets/token"), "s3cret")
	// A sibling of the alloc dir the task must not reach.
	mustWrite(t, filepath.Join(filepath.Dir(dir), "other-alloc/alloc/data/x"), "neighbour")
	for link, target := range map[string]string{
		"web/local/shadow":   "/etc/shadow",
		"alloc/data/up":      "../../..",
		"alloc/root":         "/",
		"web/local/abs-file": filepath.Join(dir, "alloc/data/f.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	// A hard link (here to a file of the alloc dir; a task's would name a
	// host file) is not served.
	mustWrite(t, filepath.Join(dir, "alloc/data/hl-src"), "linked")
	if err := os.Link(filepath.Join(dir, "alloc/data/hl-src"), filepath.Join(dir, "alloc/data/hl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "alloc/data/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	// What a task may show is served.
	f, err := c.AllocFSOpen("svc-1", "/alloc/data/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if string(b) != "hello, world" {
		t.Fatalf("cat = %q", b)
	}
	fi, err := c.AllocFSStat("svc-1", "alloc/data/f.txt")
	if err != nil || fi.Name != "f.txt" || fi.Size != 12 || fi.IsDir || fi.FileMode != "-rw-r--r--" || !strings.HasPrefix(fi.ContentType, "text/plain") {
		t.Fatalf("stat = %+v, %v", fi, err)
	}
	root, err := c.AllocFSList("svc-1", "/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range root {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "alloc,web" {
		t.Fatalf("ls / = %v; want alloc,web", names)
	}
	// A symlink is listed as one, not followed.
	local, err := c.AllocFSList("svc-1", "web/local")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range local {
		if e.Name == "shadow" {
			found = true
			if !strings.HasPrefix(e.FileMode, "L") || e.Size != int64(len("/etc/shadow")) || e.IsDir {
				t.Errorf("ls shows the symlink as %+v", e)
			}
		}
	}
	if !found {
		t.Errorf("ls web/local = %+v; no shadow entry", local)
	}

	denied := []string{
		"web/local/shadow", "/web/local/shadow", "web/local/abs-file",
		"alloc/data/up/other-alloc/alloc/data/x", "alloc/root/etc/shadow", "alloc/data/up",
		"web/secrets/token", "web/secrets", "alloc/data/fifo", "alloc/data/hl",
	}
	for _, p := range denied {
		if f, err := c.AllocFSOpen("svc-1", p); err == nil {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("cat %s served %q", p, b)
		} else {
			wantKind(t, "cat "+p, err, structs.ErrPermissionDenied)
		}
		if p == "alloc/data/fifo" || p == "alloc/data/hl" {
			continue // stat describes these without reading them
		}
		_, err := c.AllocFSStat("svc-1", p)
		wantKind(t, "stat "+p, err, structs.ErrPermissionDenied)
		_, err = c.AllocFSStream("svc-1", p, "start", 0)
		wantKind(t, "stream "+p, err, structs.ErrPermissionDenied)
	}
	if fi, err := c.AllocFSStat("svc-1", "alloc/data/hl"); err != nil || fi.ContentType != "" || fi.Size != 6 {
		t.Errorf("stat of a hard link = %+v, %v; want described, not read", fi, err)
	}
	for _, p := range []string{"alloc/root", "alloc/data/up", "alloc/data/up/other-alloc", "web/secrets"} {
		_, err := c.AllocFSList("svc-1", p)
		wantKind(t, "ls "+p, err, structs.ErrPermissionDenied)
	}
	for _, p := range []string{"..", "../other-alloc", "alloc/../../other-alloc/alloc/data/x", "alloc/data/..", "a\x00b", strings.Repeat("a", MaxFSPathBytes+1)} {
		_, err := c.AllocFSList("svc-1", p)
		wantKind(t, "ls "+p, err, structs.ErrInvalid)
		_, err = c.AllocFSOpen("svc-1", p)
		wantKind(t, "cat "+p, err, structs.ErrInvalid)
	}
	// An absolute path names the alloc dir's root, never the host's.
	_, err = c.AllocFSOpen("svc-1", "/etc/shadow")
	wantKind(t, "cat /etc/shadow", err, structs.ErrNotFound)
	_, err = c.AllocFSOpen("svc-1", "/alloc/data")
	wantKind(t, "cat a directory", err, structs.ErrInvalid)
	_, err = c.AllocFSList("nope", "/")
	wantKind(t, "ls of an unknown alloc", err, structs.ErrNotFound)
	_, err = c.AllocFSStat("svc-1", "alloc/missing")
	wantKind(t, "stat of a missing file", err, structs.ErrNotFound)
}

// TestAllocFSStream: a stream from start or end, then what is appended
// while it follows.
func TestAllocFSStream(t *testing.T) {
	c, _, _, dir := runningAlloc(t, nil)
	path := filepath.Join(dir, "alloc/data/out")
	mustWrite(t, path, "0123456789")

	for _, tc := range []struct {
		origin string
		offset int64
		want   string
		pos    int64
	}{
		{"start", 0, "0123456789", 0}, {"start", 4, "456789", 4}, {"end", 3, "789", 7},
		{"end", 100, "0123456789", 0}, {"start", 100, "", 10},
	} {
		fs, err := c.AllocFSStream("svc-1", "alloc/data/out", tc.origin, tc.offset)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := fs.Copy(context.Background(), false, &buf); err != nil {
			t.Fatal(err)
		}
		fs.Close()
		if fs.Offset() != tc.pos+int64(len(tc.want)) || buf.String() != tc.want {
			t.Errorf("%s+%d: %q ending at %d; want %q from %d", tc.origin, tc.offset, buf.String(), fs.Offset(), tc.want, tc.pos)
		}
	}
	_, err := c.AllocFSStream("svc-1", "alloc/data/out", "middle", 0)
	wantKind(t, "bad origin", err, structs.ErrInvalid)

	fs, err := c.AllocFSStream("svc-1", "alloc/data/out", "end", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var got syncBuffer
	done := make(chan error, 1)
	go func() { done <- fs.Copy(ctx, true, &got) }()
	af, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = af.WriteString("more")
	af.Close()
	waitFor(t, "appended bytes streamed", func() bool { return got.String() == "more" })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("followed stream ended with %v", err)
	}
}

// TestRestartAndSignalAlloc: a user's restart starts the task again
// without counting against its policy (attempts 0, mode fail), with
// Nomad's events; signals are validated and recorded.
func TestRestartAndSignalAlloc(t *testing.T) {
	c, srv, world, _ := runningAlloc(t, nil)
	ctx := context.Background()

	wantKind(t, "unknown alloc", c.RestartAlloc(ctx, "nope", "", false), structs.ErrNotFound)
	wantKind(t, "unknown task", c.RestartAlloc(ctx, "svc-1", "db", false), structs.ErrNotFound)
	wantKind(t, "task and all", c.RestartAlloc(ctx, "svc-1", "web", true), structs.ErrInvalid)

	if err := c.RestartAlloc(ctx, "svc-1", "web", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "task started again", func() bool { return world.startCount("web") == 2 })
	waitFor(t, "restart recorded", func() bool {
		a := srv.alloc("svc-1")
		ts := a.TaskStates["web"]
		return a.ClientStatus == structs.AllocClientStatusRunning && ts != nil && ts.Restarts == 1 && ts.State == structs.TaskStateRunning && !ts.Failed
	})
	ts := srv.alloc("svc-1").TaskStates["web"]
	var sawSignal, sawRestarting bool
	for _, ev := range ts.Events {
		switch ev.Type {
		case structs.TaskRestartSignal:
			sawSignal = ev.DisplayMessage == userRestartMsg
		case structs.TaskRestarting:
			sawRestarting = ev.RestartReason == userRestartReason
		}
	}
	if !sawSignal || !sawRestarting {
		t.Errorf("events lack the user restart: %+v", ts.Events)
	}
	// AllTasks restarts every running task.
	if err := c.RestartAlloc(ctx, "svc-1", "", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "task started a third time", func() bool { return world.startCount("web") == 3 })

	wantKind(t, "bad signal", c.SignalAlloc(ctx, "svc-1", "", "SIGNOPE"), structs.ErrInvalid)
	wantKind(t, "signal unknown task", c.SignalAlloc(ctx, "svc-1", "db", "SIGHUP"), structs.ErrNotFound)
	waitFor(t, "task running again", func() bool {
		ts := srv.alloc("svc-1").TaskStates["web"]
		return ts != nil && ts.State == structs.TaskStateRunning
	})
	if err := c.SignalAlloc(ctx, "svc-1", "web", "usr1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "signal event", func() bool {
		for _, ev := range srv.alloc("svc-1").TaskStates["web"].Events {
			if ev.Type == structs.TaskSignaling && ev.Details["signal"] == "SIGUSR1" {
				return true
			}
		}
		return false
	})
	for in, want := range map[string]string{"": "SIGKILL", "hup": "SIGHUP", "SIGTERM": "SIGTERM"} {
		if got, err := CheckSignal(in); err != nil || got != want {
			t.Errorf("CheckSignal(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestNodeMetaApply: dynamic meta reaches the node the server holds,
// survives a client restart, can hide a static key, and a bad update
// changes nothing.
func TestNodeMetaApply(t *testing.T) {
	srv, world, dir := newFakeServer(), newFakeWorld(), t.TempDir()
	c := newTestClientCfg(t, srv, world, dir, nil)
	v := "blue"
	resp, err := c.ApplyNodeMeta(map[string]*string{"color": &v, "rack": nil})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Meta["color"] != "blue" || resp.Static["rack"] != "r1" || resp.Dynamic["color"] == nil {
		t.Fatalf("response = %+v", resp)
	}
	if _, ok := resp.Meta["rack"]; ok {
		t.Fatalf("unset static key still merged: %+v", resp.Meta)
	}
	waitFor(t, "node re-registered with the meta", func() bool {
		n := srv.node(c.NodeID())
		_, rack := n.Meta["rack"]
		return n != nil && n.Meta["color"] == "blue" && !rack
	})
	big := strings.Repeat("x", MaxMetaValueBytes+1)
	for name, upd := range map[string]map[string]*string{
		"empty key": {"": &v}, "bad key": {"a b": &v}, "long value": {"k": &big}, "nothing": {},
	} {
		_, err := c.ApplyNodeMeta(upd)
		wantKind(t, name, err, structs.ErrInvalid)
	}
	if m := c.NodeMeta().Meta; m["color"] != "blue" || len(m) != 1+len(defaultNodeMeta) {
		t.Fatalf("meta after refused updates = %v", m)
	}
	c.Shutdown()
	c2, err := New(Config{StateDir: dir, Server: newFakeServer(), Meta: map[string]string{"rack": "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := c2.Node(); n.Meta["color"] != "blue" || n.Meta["rack"] != "" {
		t.Fatalf("meta after a restart = %v", n.Meta)
	}
}

// TestAllocStatsFromProc: a task's usage is its process tree's, read from
// (here a fake) /proc: RSS summed, CPU percent over the samples' interval.
func TestAllocStatsFromProc(t *testing.T) {
	proc := t.TempDir()
	page := uint64(os.Getpagesize())
	// The fake driver's first start of "web" has pid 1001; 1002 is its
	// child, 1003 an unrelated process.
	writeStat := func(pid, ppid string, utime, stime, rss int) {
		mustWrite(t, filepath.Join(proc, pid, "stat"),
			pid+" (sh (x)) S "+ppid+" 0 0 0 -1 0 0 0 0 0 "+itoa(utime)+" "+itoa(stime)+" 0 0 20 0 1 0 100 0 "+itoa(rss)+" 0\n")
	}
	writeStat("1001", "1", 100, 50, 10)
	writeStat("1002", "1001", 20, 10, 5)
	writeStat("1003", "1", 999, 999, 999)
	mustWrite(t, filepath.Join(proc, "uptime"), "11.00 1.00\n")
	c, _, _, _ := runningAlloc(t, func(cfg *Config) { cfg.ProcRoot = proc })
	u, err := c.AllocStats("svc-1")
	if err != nil {
		t.Fatal(err)
	}
	web := u.Tasks["web"]
	if web == nil {
		t.Fatalf("no task usage: %+v", u)
	}
	if web.ResourceUsage.MemoryStats.RSS != 15*page || u.ResourceUsage.MemoryStats.RSS != 15*page {
		t.Errorf("RSS = %d; want %d", web.ResourceUsage.MemoryStats.RSS, 15*page)
	}
	// 180 ticks (1.8 s) over the 10 s since the task started at tick 100.
	if p := web.ResourceUsage.CpuStats.Percent; p < 17.9 || p > 18.1 {
		t.Errorf("CPU percent since start = %v; want 18", p)
	}
	_, err = c.AllocStats("nope")
	wantKind(t, "stats of an unknown alloc", err, structs.ErrNotFound)
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestHostStats reads this host's /proc.
func TestHostStats(t *testing.T) {
	c, _, _, _ := runningAlloc(t, nil)
	st, err := c.HostStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Memory == nil || st.Memory.Total == 0 || st.Memory.Used > st.Memory.Total || len(st.CPU) == 0 || st.Uptime == 0 {
		t.Fatalf("host stats = %+v", st)
	}
	if st.AllocDirStats == nil || st.AllocDirStats.Size == 0 {
		t.Errorf("alloc dir stats = %+v", st.AllocDirStats)
	}
	for _, cpu := range st.CPU {
		if sum := cpu.User + cpu.System + cpu.Idle; sum < 0 || sum > 100.5 {
			t.Errorf("cpu %s shares sum to %v", cpu.CPU, sum)
		}
	}
}

package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// registerDirect upserts registrations on the fake server as another
// node's client would.
func registerDirect(t *testing.T, srv *fakeServer, regs ...*structs.ServiceRegistration) {
	t.Helper()
	if err := srv.UpdateServices(context.Background(), &structs.ServiceRegistrationNodeArgs{NodeID: "other", Upsert: regs}); err != nil {
		t.Fatal(err)
	}
}

func deleteDirect(t *testing.T, srv *fakeServer, allocs ...string) {
	t.Helper()
	if err := srv.UpdateServices(context.Background(), &structs.ServiceRegistrationNodeArgs{NodeID: "other", DeleteAllocIDs: allocs}); err != nil {
		t.Fatal(err)
	}
}

func reg(id, alloc, name, ns, addr string, port int, tags ...string) *structs.ServiceRegistration {
	return &structs.ServiceRegistration{ID: id, AllocID: alloc, ServiceName: name, Namespace: ns, Address: addr, Port: port,
		Tags: tags, NodeID: "n-1", Datacenter: "dc1", JobID: "api"}
}

// readFile returns a file's content, or "" when it cannot be read.
func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// Real tasks whose templates read a service: the task starts once the
// service exists, and a change of its registrations renders the file
// again and applies the change_mode.
func TestTemplateChangeModes(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	body := `{{ range nomadService "api" }}{{ .Address }}:{{ .Port }}
{{ end }}`
	// Each task records its starts and its SIGHUPs in its local dir.
	script := `trap 'echo hup >> local/hups' HUP; echo start >> local/starts; while true; do sleep 0.05; done`
	mk := func(name, mode string) *structs.Task {
		tk := rawTask(name, "/bin/sh", "-c", script)
		// A splay of 1ms: TestWaitSplay covers longer ones.
		tk.Templates = []*structs.Template{{EmbeddedTmpl: body, DestPath: "local/api.conf", ChangeMode: mode, ChangeSignal: "SIGHUP", Splay: time.Millisecond}}
		tk.KillTimeout = 2 * time.Second
		return tk
	}
	job := testJob("service", mk("restart", "restart"), mk("signal", "signal"), mk("noop", "noop"))
	srv.upsert(testAlloc("tpl-1", c.NodeID(), job))
	ar := func() *allocRunner { return c.runner("tpl-1") }
	waitFor(t, "runner", func() bool { return ar() != nil })
	taskFile := func(task, f string) string {
		_, dir := ar().task(task).execContext()
		if dir == "" {
			return ""
		}
		return readFile(filepath.Join(dir, "local", f))
	}
	// No registration yet: the tasks wait.
	waitFor(t, "tasks prepared", func() bool {
		st, _ := ar().task("restart").snapshot()
		return len(st.Events) >= 2
	})
	if st, _ := ar().task("restart").snapshot(); st.State != structs.TaskStatePending {
		t.Fatalf("task %s before its template's service exists", st.State)
	}
	registerDirect(t, srv, reg("s1", "a1", "api", "default", "10.0.0.1", 8001))
	for _, tk := range []string{"restart", "signal", "noop"} {
		waitForDiag(t, tk+" started", func() bool {
			st, h := ar().task(tk).snapshot()
			return st.State == structs.TaskStateRunning && h != nil && taskFile(tk, "starts") == "start\n"
		}, func() string {
			st, h := ar().task(tk).snapshot()
			var msgs []string
			for _, e := range st.Events {
				msgs = append(msgs, e.Type+": "+e.DisplayMessage+e.DriverError)
			}
			return fmt.Sprintf("state %s handle %v starts %q events %q conf %q", st.State, h != nil, taskFile(tk, "starts"), msgs, taskFile(tk, "api.conf"))
		})
		if got := taskFile(tk, "api.conf"); got != "10.0.0.1:8001\n" {
			t.Fatalf("%s rendered %q", tk, got)
		}
	}
	registerDirect(t, srv, reg("s2", "a2", "api", "default", "10.0.0.2", 8002))
	want := "10.0.0.1:8001\n10.0.0.2:8002\n"
	for _, tk := range []string{"restart", "signal", "noop"} {
		waitFor(t, tk+" rendered again", func() bool { return taskFile(tk, "api.conf") == want })
	}
	runningAgain := func() bool {
		st, h := ar().task("restart").snapshot()
		return st.State == structs.TaskStateRunning && h != nil && taskFile("restart", "starts") == "start\nstart\n"
	}
	waitFor(t, "restart task restarted", runningAgain)
	waitFor(t, "signal task signalled", func() bool { return taskFile("signal", "hups") == "hup\n" })
	st, _ := ar().task("restart").snapshot()
	if !hasEvent(st, structs.TaskRestartSignal) || st.State != structs.TaskStateRunning {
		t.Errorf("restart task %s, events %v", st.State, eventTypes(st))
	}
	// An unrelated change (another service) renders nothing new.
	registerDirect(t, srv, reg("o1", "ao", "other", "default", "10.0.0.9", 1))
	deleteDirect(t, srv, "a1")
	waitFor(t, "rendered after a deregistration", func() bool { return taskFile("noop", "api.conf") == "10.0.0.2:8002\n" })
	waitFor(t, "restart task restarted again", func() bool {
		st, h := ar().task("restart").snapshot()
		return st.State == structs.TaskStateRunning && h != nil && taskFile("restart", "starts") == "start\nstart\nstart\n"
	})
	waitFor(t, "signal task signalled again", func() bool { return taskFile("signal", "hups") == "hup\nhup\n" })
	if got := taskFile("noop", "starts"); got != "start\n" {
		t.Errorf("noop task started %q", got)
	}
	if got := taskFile("signal", "starts"); got != "start\n" {
		t.Errorf("signal task started %q", got)
	}
	if st, _ := ar().task("restart").snapshot(); st.Failed || st.State != structs.TaskStateRunning {
		t.Errorf("restart task after template restarts: %+v", st)
	}
	srv.setDesired("tpl-1", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped", func() bool { return srv.clientStatus("tpl-1") == structs.AllocClientStatusComplete })
}

func hasEvent(st *structs.TaskState, typ string) bool {
	for _, e := range st.Events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// A task whose template waits for a service that never comes stops with
// its alloc, dead but not failed.
func TestTemplateWaitEndsWithStop(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())
	tk := fakeTaskSpec("web", `{}`)
	tk.Templates = []*structs.Template{{EmbeddedTmpl: `{{ range nomadService "never" }}{{ .Port }}{{ end }}`, DestPath: "local/x"}}
	srv.upsert(testAlloc("tw-1", c.NodeID(), testJob("service", tk)))
	waitTaskSetup(t, c, "tw-1", "web")
	srv.setDesired("tw-1", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped", func() bool { return srv.clientStatus("tw-1") == structs.AllocClientStatusComplete })
	if ts := srv.alloc("tw-1").TaskStates["web"]; ts.Failed || ts.State != structs.TaskStateDead {
		t.Fatalf("task %+v, want dead and not failed", ts)
	}
	if world.startCount("web") != 0 {
		t.Fatalf("task started without its template")
	}
}

func TestTemplateSplay(t *testing.T) {
	ts := []*structs.Template{{Splay: time.Second}, {Splay: 3 * time.Second}, nil, {Splay: 2 * time.Second}}
	for _, c := range []struct {
		changed []int
		want    time.Duration
	}{
		{nil, 0},
		{[]int{0}, time.Second},
		{[]int{0, 3}, 2 * time.Second},
		{[]int{1, 3}, 3 * time.Second},
		{[]int{2, 9, -1}, 0},
	} {
		if got := templateSplay(ts, c.changed); got != c.want {
			t.Errorf("templateSplay(%v) = %v, want %v", c.changed, got, c.want)
		}
	}
	for range 100 {
		if d := randUpTo(time.Millisecond); d < 0 || d >= time.Millisecond {
			t.Fatalf("randUpTo(1ms) = %v, outside [0, 1ms)", d)
		}
	}
	if d := randUpTo(0); d != 0 {
		t.Errorf("randUpTo(0) = %v", d)
	}
}

// waitSplay waits what it picked, and no longer than its context lives.
func TestWaitSplay(t *testing.T) {
	start := time.Now()
	if !waitSplay(context.Background(), time.Hour, func(time.Duration) time.Duration { return 50 * time.Millisecond }) {
		t.Fatal("waitSplay gave up with a live context")
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Errorf("waited %v, want at least the 50ms picked", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if waitSplay(ctx, time.Hour, func(d time.Duration) time.Duration { return d }) {
		t.Error("waitSplay went on with a cancelled context")
	}
	if !waitSplay(context.Background(), 0, randUpTo) {
		t.Error("a zero splay did not go on at once")
	}
}

// A client stopped while a task's setup waits for its template's service
// leaves the task pending, not failed; the next client process sets it up
// again, waits again, and starts it once the service exists.
func TestTemplateWaitAcrossClientRestart(t *testing.T) {
	srv := newFakeServer()
	dir := t.TempDir()
	c1 := newRawExecClient(t, srv, dir)
	tk := rawTask("w", "/bin/sh", "-c", `echo start >> local/starts; while true; do sleep 0.05; done`)
	tk.Templates = []*structs.Template{{EmbeddedTmpl: `{{ range nomadService "api" }}{{ .Address }}:{{ .Port }}{{ end }}`, DestPath: "local/api.conf", ChangeMode: "restart"}}
	srv.upsert(testAlloc("tw-1", c1.NodeID(), testJob("service", tk)))
	waitTaskSetup(t, c1, "tw-1", "w")
	c1.Shutdown()
	st, _ := c1.runner("tw-1").task("w").snapshot()
	if st.State != structs.TaskStatePending || st.Failed || hasEvent(st, structs.TaskSetupFailure) {
		t.Fatalf("after the client stopped: %s failed=%v events %v; want pending", st.State, st.Failed, eventTypes(st))
	}

	waiting := srv.blockingLookups()
	c2 := newRawExecClient(t, srv, dir)
	defer c2.Shutdown()
	waitFor(t, "restored", func() bool { return c2.runner("tw-1") != nil })
	waitFor(t, "the restored task's lookup", func() bool { return srv.blockingLookups() > waiting })
	ar := c2.runner("tw-1")
	taskFile := func(f string) string {
		_, d := ar.task("w").execContext()
		if d == "" {
			return ""
		}
		return readFile(filepath.Join(d, "local", f))
	}
	// Still waiting: a task set up without the wait renders the file
	// (empty) before its next lookup, which follows the service.
	conf := filepath.Join(dir, "alloc", "tw-1", "w", "local", "api.conf")
	if _, err := os.Stat(conf); !errors.Is(err, os.ErrNotExist) {
		st, _ := ar.task("w").snapshot()
		t.Fatalf("the restored task rendered its template before the service existed (%v): %s events %v", err, st.State, eventTypes(st))
	}
	registerDirect(t, srv, reg("s1", "a1", "api", "default", "10.0.0.1", 8001))
	waitFor(t, "started after the registration", func() bool {
		st, h := ar.task("w").snapshot()
		return st.State == structs.TaskStateRunning && h != nil && taskFile("starts") == "start\n"
	})
	if got := readFile(conf); got != "10.0.0.1:8001" {
		t.Fatalf("rendered %q", got)
	}
	srv.setDesired("tw-1", structs.AllocDesiredStatusStop)
	waitFor(t, "stopped", func() bool { return srv.clientStatus("tw-1") == structs.AllocClientStatusComplete })
}

// waitTaskSetup waits until a task of an alloc has begun its setup.
func waitTaskSetup(t *testing.T, c *Client, allocID, task string) {
	t.Helper()
	waitFor(t, task+" set up", func() bool {
		ar := c.runner(allocID)
		if ar == nil {
			return false
		}
		st, _ := ar.task(task).snapshot()
		return hasEvent(st, structs.TaskSetup)
	})
}

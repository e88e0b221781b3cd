package docker

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/drover-org/drover/plugins/driver-docker/dockerproxy"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// The engine outage tests reach the engine through a socket proxy: the
// proxy stopped is the engine gone for the driver, while the containers
// keep running and the tests still see them on the engine's own socket.

// outageDriver is a driver reaching the engine through a fresh proxy.
func outageDriver(t *testing.T, extra string) (*Driver, *dockerproxy.Proxy) {
	t.Helper()
	p := dockerproxy.New(t)
	return newEngineDriver(t, `,"endpoint":"`+p.Endpoint()+`"`+extra), p
}

// staysRunning polls the driver's view of the task every 100 ms for the
// window and fails the test the first time it is not running.
func staysRunning(t *testing.T, d *Driver, id string, window time.Duration) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(window)
	for polls := 0; time.Now().Before(end); polls++ {
		st, err := d.InspectTask(context.Background(), id)
		if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
			t.Fatalf("poll %d: task %s = %v, %v; want running while the engine is away", polls, id, st, err)
		}
		<-tick.C
	}
}

// containerRunning asks the engine itself, not through the proxy.
func containerRunning(t *testing.T, cli *client.Client, id string) (running bool, exitCode int) {
	t.Helper()
	insp, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatalf("inspect %s on the engine: %v", shortID(id), err)
	}
	return insp.Container.State.Running, insp.Container.State.ExitCode
}

// A running task through an engine outage during which its container logs
// more and exits with 7: the driver keeps the task running while the
// engine is away, and once it answers reports the real exit code, with
// the output written during the outage in the task's log once.
func TestEngineOutageExitDuringOutage(t *testing.T) {
	cli := needEngine(t)
	d, proxy := outageDriver(t, "")
	ctx := ctxFor(t, 2*time.Minute)
	cfg := shTask(t, "t", `echo before; while [ ! -f /local/go ]; do sleep 0.05; done; echo during; exit 7`)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	waitFor(t, 30*time.Second, "the task's first line", func() bool { return readLog(t, cfg.GetStdoutPath()) == "before\n" })

	proxy.Stop()
	staysRunning(t, d, cfg.GetId(), 2*time.Second)
	touch(t, filepath.Join(cfg.GetTaskDir(), "local/go"))
	waitFor(t, 30*time.Second, "the container to exit on the engine", func() bool {
		running, _ := containerRunning(t, cli, containerIDOf(t, h))
		return !running
	})
	if _, code := containerRunning(t, cli, containerIDOf(t, h)); code != 7 {
		t.Fatalf("container exit code on the engine = %d, want 7", code)
	}
	// The container is gone but the driver cannot know it yet.
	staysRunning(t, d, cfg.GetId(), 3*time.Second)

	proxy.Start()
	res, err := d.WaitTask(ctx, cfg.GetId())
	if err != nil || res.GetExitCode() != 7 || res.GetErr() != "" {
		t.Fatalf("exit after the engine returned = %v, %v; want exit code 7", res, err)
	}
	if got := readLog(t, cfg.GetStdoutPath()); got != "before\nduring\n" {
		t.Errorf("log = %q, want each line once", got)
	}
}

// Stops through an outage: one asked for while the engine is away reaches
// the container when it answers again (StopTask waits for it), and one
// asked for after the outage stops a container the driver watches again.
func TestEngineOutageStop(t *testing.T) {
	cli := needEngine(t)
	for _, tc := range []struct {
		name         string
		duringOutage bool
	}{
		{name: "stop after the engine returns"},
		{name: "stop during the outage", duringOutage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, proxy := outageDriver(t, "")
			ctx := ctxFor(t, 2*time.Minute)
			cfg := shTask(t, "t", `trap 'echo got-term; exit 3' TERM; echo ready; i=0; while true; do sleep 0.1; i=$((i+1)); [ $((i%10)) = 0 ] && echo tick; done`)
			h, err := d.StartTask(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			id := containerIDOf(t, h)
			waitFor(t, 30*time.Second, "the task to trap SIGTERM", func() bool {
				return strings.HasPrefix(readLog(t, cfg.GetStdoutPath()), "ready\n")
			})

			proxy.Stop()
			stopped := make(chan error, 1)
			if tc.duringOutage {
				go func() { stopped <- d.StopTask(ctx, cfg.GetId(), 30*time.Second, "") }()
			}
			staysRunning(t, d, cfg.GetId(), 2*time.Second)
			if running, _ := containerRunning(t, cli, id); !running {
				t.Fatal("the container stopped while the engine was unreachable to the driver")
			}
			select {
			case err := <-stopped:
				t.Fatalf("StopTask returned %v while the engine was away", err)
			default:
			}
			ticks := strings.Count(readLog(t, cfg.GetStdoutPath()), "tick")

			proxy.Start()
			if !tc.duringOutage {
				// The log copy resumes: output written after the outage shows.
				waitFor(t, 30*time.Second, "the log copy to resume", func() bool {
					return strings.Count(readLog(t, cfg.GetStdoutPath()), "tick") > ticks+1
				})
				go func() { stopped <- d.StopTask(ctx, cfg.GetId(), 30*time.Second, "") }()
			}
			select {
			case err := <-stopped:
				if err != nil {
					t.Fatalf("StopTask = %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("StopTask did not return within a minute of the engine's return")
			}
			res, err := d.WaitTask(ctx, cfg.GetId())
			if err != nil || res.GetExitCode() != 3 {
				t.Fatalf("exit = %v, %v; want 3 from the task's SIGTERM trap", res, err)
			}
			if !strings.Contains(readLog(t, cfg.GetStdoutPath()), "got-term") {
				t.Errorf("log lacks the trap's output: %q", tail(readLog(t, cfg.GetStdoutPath())))
			}
			if err := d.DestroyTask(ctx, cfg.GetId(), false); err != nil {
				t.Fatal(err)
			}
			if n := containersOf(t, cli, cfg); n != 0 {
				t.Errorf("%d containers left after destroy, want 0", n)
			}
		})
	}
}

// An engine away for longer than engine_outage_timeout ends the task with
// an error naming the outage; its container, which may still run, is
// removed once the engine answers again, so it never outlives the task.
func TestEngineOutageTimeout(t *testing.T) {
	cli := needEngine(t)
	d, proxy := outageDriver(t, `,"engine_outage_timeout":"3s"`)
	ctx := ctxFor(t, 2*time.Minute)
	cfg := shTask(t, "t", `while true; do echo tick; sleep 1; done`)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The outage is timed from its start, not from the wait it broke:
	// let that wait hold for longer than engine_outage_timeout first.
	waitFor(t, 30*time.Second, "the task to run for over 3s", func() bool {
		return strings.Count(readLog(t, cfg.GetStdoutPath()), "tick") > 4
	})

	proxy.Stop()
	began := time.Now()
	res, err := d.WaitTask(ctx, cfg.GetId())
	took := time.Since(began)
	if err != nil || res.GetExitCode() != -1 || !strings.Contains(res.GetErr(), "docker engine unreachable for") ||
		!strings.Contains(res.GetErr(), "engine_outage_timeout 3s") {
		t.Fatalf("exit = %v, %v; want the outage named", res, err)
	}
	if took < 3*time.Second {
		t.Errorf("task ended %v into the outage, before engine_outage_timeout", took)
	}
	if running, _ := containerRunning(t, cli, containerIDOf(t, h)); !running {
		t.Fatal("the container stopped; the test needs it running through the outage")
	}
	// The client destroys the ended task; the engine is still away.
	if err := d.DestroyTask(ctx, cfg.GetId(), false); err != nil {
		t.Fatalf("DestroyTask during the outage = %v", err)
	}
	if _, err := d.InspectTask(ctx, cfg.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Errorf("InspectTask after destroy = %v, want ErrTaskNotFound", err)
	}
	if !d.removalPending(containerIDOf(t, h)) {
		t.Error("no removal pending for the container of the destroyed task")
	}
	proxy.Start()
	waitFor(t, 30*time.Second, "the container to be removed once the engine answers", func() bool {
		return containersOf(t, cli, cfg) == 0
	})
}

// A driver restarted while the engine is away (a plugin or client restart
// during the outage) recovers the task from its handle as running; when
// the engine answers it watches the container, copies its later output
// and reports its exit.
func TestEngineOutageRecover(t *testing.T) {
	needEngine(t)
	d1, proxy := outageDriver(t, "")
	ctx := ctxFor(t, 2*time.Minute)
	cfg := shTask(t, "t", `echo before; while [ ! -f /local/go ]; do sleep 0.05; done; echo after; exit 7`)
	h, err := d1.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the task's first line", func() bool { return readLog(t, cfg.GetStdoutPath()) == "before\n" })
	d1.Shutdown()

	proxy.Stop()
	d2 := newEngineDriver(t, `,"endpoint":"`+proxy.Endpoint()+`"`)
	if err := d2.RecoverTask(ctx, h); err != nil {
		t.Fatalf("RecoverTask with the engine away = %v, want the task recovered from its handle", err)
	}
	destroyAfter(t, d2, h.GetId())
	staysRunning(t, d2, h.GetId(), 2*time.Second)

	proxy.Start()
	touch(t, filepath.Join(cfg.GetTaskDir(), "local/go"))
	res, err := d2.WaitTask(ctx, h.GetId())
	if err != nil || res.GetExitCode() != 7 || res.GetErr() != "" {
		t.Fatalf("exit = %v, %v; want exit code 7", res, err)
	}
	if got := readLog(t, cfg.GetStdoutPath()); got != "before\nafter\n" {
		t.Errorf("log = %q, want each line once", got)
	}
}

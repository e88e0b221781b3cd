package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

func TestEngineRunLogsAndLayout(t *testing.T) {
	cli := needEngine(t)
	d := newEngineDriver(t, "")
	cfg := shTask(t, "web", `echo hello; echo oops >&2; echo "$NOMAD_ALLOC_DIR $NOMAD_TASK_NAME" > /alloc/seen; ls -d /local /secrets; echo $PATH`)
	ctx := ctxFor(t, time.Minute)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	res, err := d.WaitTask(ctx, h.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if res.GetExitCode() != 0 || res.GetOomKilled() {
		t.Fatalf("exit = %v", res)
	}
	if got := readLog(t, cfg.GetStdoutPath()); got != "hello\n/local\n/secrets\n/bin\n" {
		t.Errorf("stdout = %q", got)
	}
	if got := readLog(t, cfg.GetStderrPath()); got != "oops\n" {
		t.Errorf("stderr = %q", got)
	}
	seen, err := os.ReadFile(filepath.Join(cfg.GetAllocDir(), "alloc/seen"))
	if err != nil || string(seen) != "/alloc web\n" {
		t.Errorf("alloc dir seen from the task = %q, %v", seen, err)
	}
	if err := d.DestroyTask(ctx, h.GetId(), false); err != nil {
		t.Fatal(err)
	}
	if n := containersOf(t, cli, cfg); n != 0 {
		t.Errorf("%d containers left after DestroyTask", n)
	}
	if _, err := d.InspectTask(ctx, h.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Errorf("InspectTask after destroy = %v", err)
	}
}

func TestEngineExitCodes(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	for _, tc := range []struct {
		script string
		code   int32
	}{{"exit 3", 3}, {"exit 0", 0}, {`sh -c 'kill -9 $$'; exit $?`, 137}} {
		t.Run(tc.script, func(t *testing.T) {
			cfg := shTask(t, "t", tc.script)
			ctx := ctxFor(t, time.Minute)
			if _, err := d.StartTask(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			destroyAfter(t, d, cfg.GetId())
			res, err := d.WaitTask(ctx, cfg.GetId())
			if err != nil || res.GetExitCode() != tc.code {
				t.Fatalf("WaitTask = %v, %v; want exit %d", res, err, tc.code)
			}
			st, err := d.InspectTask(ctx, cfg.GetId())
			if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_EXITED || st.GetExitResult().GetExitCode() != tc.code {
				t.Fatalf("InspectTask = %v, %v", st, err)
			}
		})
	}
}

func TestEngineOOMKilled(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	cfg := newEngineTask(t, "hog", memhogImage, "")
	cfg.Resources = &driverpb.Resources{Cpu: 100, MemoryMb: 32}
	ctx := ctxFor(t, 2*time.Minute)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	res, err := d.WaitTask(ctx, cfg.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if !res.GetOomKilled() || res.GetExitCode() != 137 {
		t.Fatalf("exit = %v, want OOM kill (exit 137); stdout tail: %q", res, tail(readLog(t, cfg.GetStdoutPath())))
	}
	if out := readLog(t, cfg.GetStdoutPath()); !strings.Contains(out, "allocated 4 MiB") || strings.Contains(out, "allocated 64 MiB") {
		t.Errorf("the hog was not stopped near its 32 MiB limit: %q", tail(out))
	}
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}

func TestEngineKillTimeoutAndSignal(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	for _, tc := range []struct {
		name, script, killSignal string
		timeout                  time.Duration
		wantCode                 int32
		wantSignal               int32
		wantLog                  string
	}{
		// The task traps SIGTERM and carries on: it is killed once
		// kill_timeout has passed.
		{name: "term ignored, killed after timeout", script: `trap 'echo got-term' TERM; echo ready; while true; do sleep 0.05; done`,
			timeout: time.Second, wantCode: 137, wantSignal: 9, wantLog: "got-term"},
		// kill_signal = SIGUSR1: the task exits on it, well before the timeout.
		{name: "kill_signal honoured", script: `trap 'echo got-usr1; exit 0' USR1; echo ready; while true; do sleep 0.05; done`,
			killSignal: "SIGUSR1", timeout: 30 * time.Second, wantCode: 0, wantLog: "got-usr1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := shTask(t, "t", tc.script)
			cfg.KillSignal = tc.killSignal
			ctx := ctxFor(t, time.Minute)
			if _, err := d.StartTask(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			destroyAfter(t, d, cfg.GetId())
			waitFor(t, 30*time.Second, "the task to trap its signal", func() bool {
				return strings.Contains(readLog(t, cfg.GetStdoutPath()), "ready")
			})
			began := time.Now()
			if err := d.StopTask(ctx, cfg.GetId(), tc.timeout, ""); err != nil {
				t.Fatal(err)
			}
			took := time.Since(began)
			res, err := d.WaitTask(ctx, cfg.GetId())
			if err != nil || res.GetExitCode() != tc.wantCode || res.GetSignal() != tc.wantSignal {
				t.Fatalf("exit = %v, %v; want code %d signal %d", res, err, tc.wantCode, tc.wantSignal)
			}
			if tc.wantSignal == 9 && took < tc.timeout {
				t.Errorf("killed after %v, before kill_timeout %v", took, tc.timeout)
			}
			if tc.wantSignal == 0 && took >= tc.timeout {
				t.Errorf("stop took %v: the kill_signal did not end the task", took)
			}
			waitFor(t, 10*time.Second, "the trap's output", func() bool {
				return strings.Contains(readLog(t, cfg.GetStdoutPath()), tc.wantLog)
			})
		})
	}
}

// TestEngineRecover emulates a plugin restart: the first driver process
// goes away (its goroutines end, the containers keep running), and a new
// one recovers the tasks from their handles.
func TestEngineRecover(t *testing.T) {
	cli := needEngine(t)
	d1 := newEngineDriver(t, "")
	ctx := ctxFor(t, 2*time.Minute)

	running := shTask(t, "running", `echo before; while [ ! -f /local/more ]; do sleep 0.05; done; echo after; sleep 1000`)
	exits := shTask(t, "exits", `echo before; while [ ! -f /local/go ]; do sleep 0.05; done; echo bye; exit 7`)
	hRunning, err := d1.StartTask(ctx, running)
	if err != nil {
		t.Fatal(err)
	}
	hExits, err := d1.StartTask(ctx, exits)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*driverpb.TaskConfig{running, exits} {
		waitFor(t, 30*time.Second, c.GetTaskName()+" to log", func() bool { return readLog(t, c.GetStdoutPath()) == "before\n" })
	}
	d1.Shutdown()

	// While no driver watches: one task logs more, the other exits.
	touch(t, filepath.Join(running.GetTaskDir(), "local/more"))
	touch(t, filepath.Join(exits.GetTaskDir(), "local/go"))
	waitFor(t, 30*time.Second, "the detached container to exit", func() bool {
		insp, err := cli.ContainerInspect(ctx, containerIDOf(t, hExits), client.ContainerInspectOptions{})
		return err == nil && !insp.Container.State.Running
	})

	d2 := newEngineDriver(t, "")
	for _, h := range []*driverpb.TaskHandle{hRunning, hExits} {
		if err := d2.RecoverTask(ctx, h); err != nil {
			t.Fatalf("RecoverTask(%s) = %v", h.GetId(), err)
		}
		destroyAfter(t, d2, h.GetId())
		if err := d2.RecoverTask(ctx, h); err != nil {
			t.Fatalf("second RecoverTask(%s) = %v, want a no-op", h.GetId(), err)
		}
	}
	res, err := d2.WaitTask(ctx, hExits.GetId())
	if err != nil || res.GetExitCode() != 7 {
		t.Fatalf("recovered exited task: %v, %v; want exit 7 from the engine", res, err)
	}
	if got := readLog(t, exits.GetStdoutPath()); got != "before\nbye\n" {
		t.Errorf("exited task's log = %q, want each line once", got)
	}
	st, err := d2.InspectTask(ctx, hRunning.GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("recovered running task: %v, %v", st, err)
	}
	waitFor(t, 30*time.Second, "the recovered task's later output", func() bool {
		return readLog(t, running.GetStdoutPath()) == "before\nafter\n"
	})
	if _, err := d2.StartTask(ctx, running); !errors.Is(err, driver.ErrTaskExists) {
		t.Errorf("StartTask of a recovered task = %v, want ErrTaskExists", err)
	}
	// A driver that lost the handle altogether adopts the running
	// container instead of starting a second one.
	d3 := newEngineDriver(t, "")
	h3, err := d3.StartTask(ctx, running)
	if err != nil {
		t.Fatal(err)
	}
	if containerIDOf(t, h3) != containerIDOf(t, hRunning) {
		t.Errorf("StartTask without the handle created container %s, want the running %s adopted", containerIDOf(t, h3), containerIDOf(t, hRunning))
	}
	if n := containersOf(t, cli, running); n != 1 {
		t.Errorf("%d containers for the task, want 1", n)
	}
	if err := d2.StopTask(ctx, hRunning.GetId(), 0, ""); err != nil {
		t.Fatal(err)
	}

	// A container removed behind the driver's back cannot be recovered.
	gone := shTask(t, "gone", "exit 0")
	hGone, err := d2.StartTask(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d2.WaitTask(ctx, hGone.GetId()); err != nil {
		t.Fatal(err)
	}
	if err := d2.DestroyTask(ctx, hGone.GetId(), false); err != nil {
		t.Fatal(err)
	}
	if err := newEngineDriver(t, "").RecoverTask(ctx, hGone); !errors.Is(err, driver.ErrTaskNotFound) {
		t.Errorf("RecoverTask of a removed container = %v, want ErrTaskNotFound", err)
	}
}

func containerIDOf(t *testing.T, h *driverpb.TaskHandle) string {
	t.Helper()
	st, err := decodeState(h)
	if err != nil {
		t.Fatal(err)
	}
	return st.ContainerID
}

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEngineBadImage(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	for _, tc := range []struct{ image, config, want string }{
		{"drover-test/no-such-image:nope", "", `failed to pull image "drover-test/no-such-image:nope"`},
		// force_pull pulls even a present image, which fails here: no
		// registry is reachable.
		{busyboxImage, `{"image":"` + busyboxImage + `","force_pull":true}`, `failed to pull image "` + busyboxImage + `"`},
	} {
		cfg := newEngineTask(t, "bad", tc.image, tc.config)
		_, err := d.StartTask(ctxFor(t, time.Minute), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrImagePull) {
			t.Errorf("StartTask(%s) = %v, want an ErrImagePull containing %q", tc.image, err, tc.want)
		}
		if _, err := d.InspectTask(context.Background(), cfg.GetId()); !errors.Is(err, driver.ErrTaskNotFound) {
			t.Errorf("a failed start left the task tracked: %v", err)
		}
	}
}

func TestEngineFingerprintHealthy(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	fp, err := d.Fingerprint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a := fp.GetAttributes()
	if !fp.GetDetected() || !fp.GetHealthy() || a[AttrDriver] != "1" || a["driver.docker.version"] == "" ||
		a["driver.docker.api_version"] == "" || a["driver.docker.os_type"] != "linux" || !strings.Contains(a["driver.docker.runtimes"], "runc") {
		t.Fatalf("Fingerprint = %v", fp)
	}
}

// TestEngineImageGC: an image is removed image_delay after its last task
// is destroyed, and not while another task still uses it.
func TestEngineImageGC(t *testing.T) {
	cli := needEngine(t)
	tag := fmt.Sprintf("drover-test/gc:%d", time.Now().UnixNano())
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		t.Skip(err)
	}
	if err := buildImage(cli, tag, map[string][]byte{
		"Dockerfile": []byte("FROM scratch\nCOPY busybox /bin/sh\nLABEL drover.test=" + tag[len("drover-test/gc:"):] + "\n"),
		"busybox":    bb,
	}); err != nil {
		t.Fatal(err)
	}
	cfgD, err := ParsePluginConfig([]byte(`{"gc":{"image":true,"image_delay":"0s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(hclog.NewNullLogger(), cfgD)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Shutdown)
	ctx := ctxFor(t, time.Minute)
	conf := fmt.Sprintf(`{"image":%q,"command":"/bin/sh","args":["-c","exit 0"]}`, tag)
	a, b := newEngineTask(t, "a", tag, conf), newEngineTask(t, "b", tag, conf)
	for _, c := range []*driverpb.TaskConfig{a, b} {
		if _, err := d.StartTask(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := d.WaitTask(ctx, c.GetId()); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DestroyTask(ctx, a.GetId(), false); err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	refs := len(d.images)
	for _, r := range d.images {
		if r.count != 1 || r.timer != nil {
			t.Errorf("image ref after the first destroy = %+v, want 1 user and no removal pending", r)
		}
	}
	d.mu.Unlock()
	if refs != 1 {
		t.Fatalf("%d image refs, want 1", refs)
	}
	if _, err := cli.ImageInspect(ctx, tag); err != nil {
		t.Fatalf("image removed while task b uses it: %v", err)
	}
	if err := d.DestroyTask(ctx, b.GetId(), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the unused image to be removed", func() bool {
		_, err := cli.ImageInspect(ctx, tag)
		return err != nil
	})
}

// TestEngineOverGRPC drives a task through the plugin's gRPC glue, as the
// client does: the errors' kinds and messages survive the wire.
func TestEngineOverGRPC(t *testing.T) {
	needEngine(t)
	d := drivertestConnect(t, newEngineDriver(t, ""))
	ctx := ctxFor(t, time.Minute)
	cfg := shTask(t, "g", "echo over-grpc; exit 5")
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 5 {
		t.Fatalf("WaitTask = %v, %v", res, err)
	}
	if _, err := d.StartTask(ctx, cfg); !errors.Is(err, driver.ErrTaskExists) {
		t.Errorf("duplicate StartTask = %v", err)
	}
	if err := d.SignalTask(ctx, cfg.GetId(), "SIGHUP"); !errors.Is(err, driver.ErrTaskNotRunning) {
		t.Errorf("SignalTask(exited) = %v", err)
	}
	bad := newEngineTask(t, "bad", busyboxImage, `{"image":"x","privileged":true}`)
	if _, err := d.StartTask(ctx, bad); !errors.Is(err, driver.ErrInvalidConfig) || !strings.Contains(err.Error(), "allow_privileged") {
		t.Errorf("StartTask(privileged) = %v", err)
	}
}

// TestEngineCapabilities: the container holds what allow_caps and the
// task's cap_add/cap_drop leave it, read from its own /proc status.
func TestEngineCapabilities(t *testing.T) {
	needEngine(t)
	const chown, netRaw, netAdmin = 0, 13, 12 // capability bit numbers
	for _, tc := range []struct {
		name, plugin, capCfg string
		has, lacks           []uint
	}{
		{"nomad's defaults drop net_raw", "", "", []uint{chown}, []uint{netRaw, netAdmin}},
		{"cap_drop", "", `,"cap_drop":["CHOWN"]`, nil, []uint{chown, netRaw}},
		{"cap_add within allow_caps", `,"allow_caps":["chown","net_admin"]`, `,"cap_add":["NET_ADMIN"]`, []uint{chown, netAdmin}, []uint{netRaw}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newEngineDriver(t, tc.plugin)
			cfg := newEngineTask(t, "caps", busyboxImage, fmt.Sprintf(`{"image":%q,"command":"sh","args":["-c","grep CapEff /proc/self/status"]%s}`, busyboxImage, tc.capCfg))
			ctx := ctxFor(t, time.Minute)
			if _, err := d.StartTask(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			destroyAfter(t, d, cfg.GetId())
			if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 0 {
				t.Fatalf("WaitTask = %v, %v", res, err)
			}
			var caps uint64
			out := readLog(t, cfg.GetStdoutPath())
			if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(out, "CapEff:")), "%x", &caps); err != nil {
				t.Fatalf("parse %q: %v", out, err)
			}
			for _, b := range tc.has {
				if caps&(1<<b) == 0 {
					t.Errorf("CapEff %x lacks capability %d", caps, b)
				}
			}
			for _, b := range tc.lacks {
				if caps&(1<<b) != 0 {
					t.Errorf("CapEff %x holds capability %d", caps, b)
				}
			}
		})
	}
}

// TestEngineContainerKeptAndRestarted: with gc.container = false a
// destroyed task's container stays; the task's next run (a restart)
// replaces it instead of failing on the taken name.
func TestEngineContainerKeptAndRestarted(t *testing.T) {
	cli := needEngine(t)
	d := newEngineDriver(t, `,"gc":{"image":false,"container":false}`)
	cfg := shTask(t, "again", "echo run; exit 4")
	ctx := ctxFor(t, time.Minute)
	var ids []string
	for run := 1; run <= 2; run++ {
		h, err := d.StartTask(ctx, cfg)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 4 {
			t.Fatalf("run %d: %v, %v", run, res, err)
		}
		if err := d.DestroyTask(ctx, cfg.GetId(), false); err != nil {
			t.Fatal(err)
		}
		if n := containersOf(t, cli, cfg); n != 1 {
			t.Fatalf("run %d: %d containers after destroy, want the one kept", run, n)
		}
		ids = append(ids, containerIDOf(t, h))
	}
	t.Cleanup(func() {
		_, _ = cli.ContainerRemove(context.Background(), ids[1], client.ContainerRemoveOptions{Force: true})
	})
	if ids[0] == ids[1] {
		t.Errorf("the second run reused the exited container %s", ids[0])
	}
	if got := readLog(t, cfg.GetStdoutPath()); got != "run\nrun\n" {
		t.Errorf("log over two runs = %q", got)
	}
}

// TestEngineHostSettings: hostname, extra_hosts and dns_servers reach the
// container's /etc files.
func TestEngineHostSettings(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	cfg := newEngineTask(t, "net", busyboxImage, fmt.Sprintf(`{"image":%q,"command":"sh","args":["-c","cat /etc/hostname /etc/hosts /etc/resolv.conf"],
		"hostname":"drover-box","extra_hosts":["db.internal:10.1.2.3"],"dns_servers":["10.9.9.9"]}`, busyboxImage))
	ctx := ctxFor(t, time.Minute)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("WaitTask = %v, %v", res, err)
	}
	out := readLog(t, cfg.GetStdoutPath())
	for _, want := range []string{"drover-box\n", "10.1.2.3\tdb.internal", "nameserver 10.9.9.9"} {
		if !strings.Contains(out, want) {
			t.Errorf("container /etc files lack %q:\n%s", want, out)
		}
	}
}

// A registry that accepts the connection and never answers is given up
// after image_pull_timeout, with the reason.
func TestEngineImagePullTimeout(t *testing.T) {
	needEngine(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	d := newEngineDriver(t, "")
	image := ln.Addr().String() + "/drover-test/hangs:1"
	cfg := newEngineTask(t, "hang", image, `{"image":"`+image+`","image_pull_timeout":"2s"}`)
	_, err = d.StartTask(ctxFor(t, time.Minute), cfg)
	if err == nil || !errors.Is(err, ErrImagePull) || !strings.Contains(err.Error(), "image_pull_timeout (2s) reached") {
		t.Fatalf("StartTask = %v, want an ErrImagePull naming image_pull_timeout", err)
	}
}

// TestEngineContainerSettings: entrypoint, args, work_dir, labels,
// network_mode and logging reach the engine's container, as its inspect
// and the task's own view show. (privileged is not run: this machine's
// engine cannot start a privileged container.)
func TestEngineContainerSettings(t *testing.T) {
	cli := needEngine(t)
	d := newEngineDriver(t, "")
	cfg := newEngineTask(t, "set", busyboxImage, fmt.Sprintf(`{"image":%q,"entrypoint":["sh","-c"],
		"args":["pwd; ls /sys/class/net"],"work_dir":"/srv/app",
		"labels":{"team":"web"},"network_mode":"none",
		"logging":{"type":"json-file","config":{"max-size":"1m"}}}`, busyboxImage))
	ctx := ctxFor(t, time.Minute)
	h, err := d.StartTask(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("WaitTask = %v, %v (stderr %q)", res, err, readLog(t, cfg.GetStderrPath()))
	}
	// The task ran in work_dir and saw only the loopback (network_mode =
	// "none").
	if out := readLog(t, cfg.GetStdoutPath()); out != "/srv/app\nlo\n" {
		t.Errorf("task output = %q; want work_dir, then only lo", out)
	}
	insp, err := cli.ContainerInspect(ctx, containerIDOf(t, h), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, hc := insp.Container.Config, insp.Container.HostConfig
	if !slices.Equal(c.Entrypoint, []string{"sh", "-c"}) || len(c.Cmd) != 1 || c.WorkingDir != "/srv/app" {
		t.Errorf("entrypoint %q, cmd %q, work dir %q", c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	if c.Labels["team"] != "web" || c.Labels[LabelAllocID] != cfg.GetAllocId() {
		t.Errorf("labels = %v", c.Labels)
	}
	if string(hc.NetworkMode) != "none" {
		t.Errorf("network mode %q", hc.NetworkMode)
	}
	if hc.LogConfig.Type != "json-file" || hc.LogConfig.Config["max-size"] != "1m" {
		t.Errorf("log config = %+v", hc.LogConfig)
	}
}

// TestEngineVolumesAndMounts: a relative `volumes` entry and a read-only
// bind `mount` under the task dir are the container's paths: what the task
// writes to the volume lands in the task dir, the mount's file is read,
// and writing to the read-only mount fails.
func TestEngineVolumesAndMounts(t *testing.T) {
	needEngine(t)
	d := newEngineDriver(t, "")
	cfg := newEngineTask(t, "vol", busyboxImage, fmt.Sprintf(`{"image":%q,"command":"sh",
		"args":["-c","cat /etc/cfg/app.conf; echo written > /data/out; if echo x > /etc/cfg/new 2>/dev/null; then echo ro-writable; else echo ro-refused; fi"],
		"volumes":["data:/data"],"mount":{"type":"bind","source":"local/cfg","target":"/etc/cfg","readonly":true}}`, busyboxImage))
	for _, dir := range []string{"data", "local/cfg"} {
		if err := os.MkdirAll(filepath.Join(cfg.GetTaskDir(), dir), 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// The container's root user writes into the volume.
	if err := os.Chmod(filepath.Join(cfg.GetTaskDir(), "data"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.GetTaskDir(), "local/cfg/app.conf"), []byte("port=8080\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	if _, err := d.StartTask(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	destroyAfter(t, d, cfg.GetId())
	if res, err := d.WaitTask(ctx, cfg.GetId()); err != nil || res.GetExitCode() != 0 {
		t.Fatalf("WaitTask = %v, %v (stderr %q)", res, err, readLog(t, cfg.GetStderrPath()))
	}
	if out := readLog(t, cfg.GetStdoutPath()); out != "port=8080\nro-refused\n" {
		t.Errorf("task output = %q, want the mounted file and the read-only mount refusing a write", out)
	}
	if got, err := os.ReadFile(filepath.Join(cfg.GetTaskDir(), "data/out")); err != nil || string(got) != "written\n" {
		t.Errorf("volume file on the host = %q, %v", got, err)
	}
}

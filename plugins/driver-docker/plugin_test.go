package docker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
	"github.com/drover-org/drover/sdk/shared"
)

// pluginProcess is the driver as a real plugin process (this test binary
// serving it), as the client agent runs it.
type pluginProcess struct {
	client *plugin.Client
	driver driver.Driver
	pid    int
}

func startPluginProcess(t *testing.T, config string) *pluginProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnvVar+"=1", ConfigEnvVar+"="+config, "GORACE=atexit_sleep_ms=0")
	c := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  shared.Handshake,
		Plugins:          map[string]plugin.Plugin{shared.KindDriver: &driver.Plugin{}},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		GRPCDialOptions:  shared.DialOptions(),
		Logger:           hclog.NewNullLogger(),
	})
	t.Cleanup(c.Kill)
	rpc, err := c.Client()
	if err != nil {
		t.Fatalf("start plugin: %v", err)
	}
	raw, err := rpc.Dispense(shared.KindDriver)
	if err != nil {
		t.Fatal(err)
	}
	return &pluginProcess{client: c, driver: raw.(driver.Driver), pid: c.ReattachConfig().Pid}
}

// TestEngineTaskSurvivesPluginDeath kills the plugin process with SIGKILL
// while one task runs and another is about to exit; a new plugin process
// recovers both from their handles: no second container, the running one
// still running and logging, the exited one with its real exit code.
func TestEngineTaskSurvivesPluginDeath(t *testing.T) {
	cli := needEngine(t)
	ctx := ctxFor(t, 2*time.Minute)
	first := startPluginProcess(t, `{"gc":{"image":false}}`)
	if fp, err := first.driver.Fingerprint(ctx); err != nil || !fp.GetHealthy() {
		t.Fatalf("Fingerprint = %v, %v", fp, err)
	}
	long := shTask(t, "long", `echo one; while [ ! -f /local/more ]; do sleep 0.05; done; echo two; sleep 1000`)
	short := shTask(t, "short", `echo one; while [ ! -f /local/go ]; do sleep 0.05; done; exit 9`)
	var handles []*driverpb.TaskHandle
	for _, c := range []*driverpb.TaskConfig{long, short} {
		h, err := first.driver.StartTask(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
		waitFor(t, 30*time.Second, c.GetTaskName()+" to log", func() bool { return readLog(t, c.GetStdoutPath()) == "one\n" })
	}
	if err := syscall.Kill(first.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the plugin process to exit", first.client.Exited)

	touch(t, filepath.Join(long.GetTaskDir(), "local/more"))
	touch(t, filepath.Join(short.GetTaskDir(), "local/go"))
	waitFor(t, 30*time.Second, "the short task's container to exit with no driver watching", func() bool {
		insp, err := cli.ContainerInspect(ctx, containerIDOf(t, handles[1]), client.ContainerInspectOptions{})
		return err == nil && !insp.Container.State.Running
	})

	second := startPluginProcess(t, `{"gc":{"image":false}}`)
	for _, h := range handles {
		if err := second.driver.RecoverTask(ctx, h); err != nil {
			t.Fatalf("RecoverTask(%s) = %v", h.GetId(), err)
		}
		t.Cleanup(func() { _ = second.driver.DestroyTask(context.Background(), h.GetId(), true) })
	}
	res, err := second.driver.WaitTask(ctx, handles[1].GetId())
	if err != nil || res.GetExitCode() != 9 {
		t.Fatalf("recovered short task: %v, %v; want exit 9", res, err)
	}
	st, err := second.driver.InspectTask(ctx, handles[0].GetId())
	if err != nil || st.GetState() != driverpb.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("recovered long task: %v, %v", st, err)
	}
	waitFor(t, 30*time.Second, "the long task's output after the restart, once", func() bool {
		return readLog(t, long.GetStdoutPath()) == "one\ntwo\n"
	})
	for _, c := range []*driverpb.TaskConfig{long, short} {
		if n := containersOf(t, cli, c); n != 1 {
			t.Errorf("task %s has %d containers, want 1", c.GetTaskName(), n)
		}
	}
	if err := second.driver.StopTask(ctx, handles[0].GetId(), time.Second, ""); err != nil {
		t.Fatal(err)
	}
}

//go:build linux

package docker

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// TestTasksJoinAllocationNetwork: the docker tasks of an allocation with
// its own network namespace run in that namespace (through the
// allocation's pause container, from infra_image), sharing it; the pause
// container goes with the last task; a task setting network_mode there
// is refused.
func TestTasksJoinAllocationNetwork(t *testing.T) {
	cli := needEngine(t)
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine (or, the
		// main thread, is wedged).
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		errc <- unix.Mount(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), path, "none", unix.MS_BIND, "")
	}()
	if err := <-errc; err != nil {
		t.Skipf("cannot make a network namespace here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(path, unix.MNT_DETACH) })
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]", st.Ino)

	d := newEngineDriver(t, `,"infra_image":"`+busyboxImage+`"`)
	ctx := ctxFor(t, 2*time.Minute)
	a := shTask(t, "a", "readlink /proc/self/ns/net; { hostname; cat /etc/resolv.conf; } >&2; sleep 300")
	b := shTask(t, "b", "readlink /proc/self/ns/net; sleep 300")
	b.AllocId, b.Id = a.GetAllocId(), a.GetAllocId()+"/b"
	for _, cfg := range []*driverpb.TaskConfig{a, b} {
		// The group's hostname and dns block: the pause container's,
		// which the tasks share.
		cfg.NetworkIsolation = &driverpb.NetworkIsolation{Path: path, Hostname: "web-alloc"}
		cfg.Dns = &driverpb.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"svc.example"}, Options: []string{"ndots:1"}}
		if _, err := d.StartTask(ctx, cfg); err != nil {
			t.Fatalf("StartTask %s: %v", cfg.GetTaskName(), err)
		}
		destroyAfter(t, d, cfg.GetId())
	}
	for _, cfg := range []*driverpb.TaskConfig{a, b} {
		waitFor(t, time.Minute, cfg.GetTaskName()+"'s output", func() bool {
			return strings.TrimSpace(readLog(t, cfg.GetStdoutPath())) != ""
		})
		if got := strings.TrimSpace(readLog(t, cfg.GetStdoutPath())); got != want {
			t.Fatalf("task %s's network namespace = %q, want the allocation's %q", cfg.GetTaskName(), got, want)
		}
	}
	waitFor(t, time.Minute, "a's hostname and resolv.conf", func() bool {
		return strings.Contains(readLog(t, a.GetStderrPath()), "options")
	})
	errOut := readLog(t, a.GetStderrPath())
	for _, line := range []string{"web-alloc\n", "nameserver 192.0.2.53\n", "search svc.example\n", "options ndots:1\n"} {
		if !strings.Contains(errOut, line) {
			t.Fatalf("task a sees hostname and resolv.conf:\n%s\nwant %q in it", errOut, line)
		}
	}
	pauseExists := func() bool {
		_, err := cli.ContainerInspect(ctx, pauseName(a.GetAllocId()), client.ContainerInspectOptions{})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if !pauseExists() {
		t.Fatal("no pause container while the tasks run")
	}
	if err := d.DestroyTask(ctx, a.GetId(), true); err != nil {
		t.Fatal(err)
	}
	if !pauseExists() {
		t.Fatal("the pause container went while task b still runs")
	}
	if err := d.DestroyTask(ctx, b.GetId(), true); err != nil {
		t.Fatal(err)
	}
	if pauseExists() {
		t.Fatal("the pause container outlived the allocation's last task")
	}

	bad := newEngineTask(t, "c", busyboxImage, `{"image":"`+busyboxImage+`","network_mode":"host"}`)
	bad.NetworkIsolation = &driverpb.NetworkIsolation{Path: path}
	if _, err := d.StartTask(ctx, bad); err == nil || !strings.Contains(err.Error(), "network_mode cannot be set") {
		t.Fatalf("network_mode in a bridge group: %v, want refused", err)
	}
}

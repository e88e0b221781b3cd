//go:build linux

package execdriver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// TestTaskJoinsNetworkNamespace: an exec task given the allocation's
// network namespace runs in it, inside its own other namespaces.
func TestTaskJoinsNetworkNamespace(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
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

	cfg := taskConfig(t, "a1/netns", "readlink /proc/self/ns/net")
	cfg.NetworkIsolation = &driverpb.NetworkIsolation{Path: path}
	if _, err := d.StartTask(testCtx(t), cfg); err != nil {
		t.Fatal(err)
	}
	if res := wait(t, d, cfg.GetId()); res.GetExitCode() != 0 {
		t.Fatalf("exit = %v: %s", res, read(t, cfg.GetStderrPath()))
	}
	if got, want := strings.TrimSpace(read(t, cfg.GetStdoutPath())), fmt.Sprintf("net:[%d]", st.Ino); got != want {
		t.Fatalf("task's network namespace = %q, want %q", got, want)
	}
}

// TestTaskHostnameAndResolvConf: in the allocation's own network, an exec
// task has the group's hostname (in a UTS namespace of its own, the
// node's untouched) and the allocation's resolv.conf at /etc/resolv.conf.
func TestTaskHostnameAndResolvConf(t *testing.T) {
	d := New(nil, nil)
	needIsolation(t, d)
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
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
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	const conf = "nameserver 192.0.2.53\nsearch svc.example\n"
	if err := os.WriteFile(resolv, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	nodeHost, _ := os.Hostname()

	tests := []struct {
		name, hostname, resolv, want string
	}{
		{"both", "web-alloc", resolv, "web-alloc\n" + conf},
		{"hostname only", "web-2", "", "web-2\n"},
		{"resolv.conf only", "", resolv, nodeHost + "\n" + conf},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := "hostname"
			if tt.resolv != "" {
				script += "; cat /etc/resolv.conf"
			}
			cfg := taskConfig(t, fmt.Sprintf("a%d/uts", i), script)
			cfg.NetworkIsolation = &driverpb.NetworkIsolation{Path: path, Hostname: tt.hostname}
			cfg.ResolvConfPath = tt.resolv
			if _, err := d.StartTask(testCtx(t), cfg); err != nil {
				t.Fatal(err)
			}
			if res := wait(t, d, cfg.GetId()); res.GetExitCode() != 0 {
				t.Fatalf("exit = %v: %s", res, read(t, cfg.GetStderrPath()))
			}
			if got := read(t, cfg.GetStdoutPath()); got != tt.want {
				t.Fatalf("task's hostname and resolv.conf:\n%s\nwant:\n%s", got, tt.want)
			}
			if h, _ := os.Hostname(); h != nodeHost {
				t.Fatalf("the node's hostname changed to %q", h)
			}
		})
	}
}

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

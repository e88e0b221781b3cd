//go:build linux

package rawexec

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

// pinnedNetns makes a network namespace pinned at a file of the test's,
// as the client does for an allocation, or skips where it cannot.
func pinnedNetns(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	path := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with the goroutine, or, the
		// main thread, is wedged.
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
	return path
}

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestTaskJoinsNetworkNamespace: a task given the allocation's network
// namespace runs in it (with or without a cgroup), a task given none
// runs in the node's, and a relative path is refused.
func TestTaskJoinsNetworkNamespace(t *testing.T) {
	// The node's namespace, read before a thread (possibly the main
	// one, which /proc/self names) is left in another.
	host := nsInode(t, "/proc/self/ns/net")
	ns := pinnedNetns(t)
	tests := []struct {
		name      string
		netns     string
		hostname  string
		noCgroups bool
		want      uint64
		refused   string
	}{
		{"in the allocation's namespace", ns, "", false, nsInode(t, ns), ""},
		{"in the namespace without cgroups", ns, "", true, nsInode(t, ns), ""},
		{"host mode", "", "", false, host, ""},
		{"relative path", "netns", "", false, 0, "network_isolation.path must be an absolute path"},
		{"group hostname", ns, "web", false, 0, `the group network's hostname "web" cannot be given to a raw_exec task`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDriver()
			d.cfg.NoCgroups = tc.noCgroups
			defer d.Shutdown(testCtx(t))
			cfg := newTaskConfig(t, fmt.Sprintf("alloc/netns-%d", i), "stat", "-L", "-c", "%i", "/proc/self/ns/net")
			if tc.netns != "" {
				cfg.NetworkIsolation = &driverpb.NetworkIsolation{Path: tc.netns, Hostname: tc.hostname}
			}
			if tc.refused != "" {
				_, err := d.StartTask(testCtx(t), cfg)
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("StartTask = %v, want it refused with %q", err, tc.refused)
				}
				return
			}
			start(t, d, cfg)
			if res := awaitExit(t, d, cfg.GetId()); res.GetExitCode() != 0 {
				t.Fatalf("exit %v: %s", res, readFile(t, cfg.GetStderrPath()))
			}
			if got := strings.TrimSpace(readFile(t, cfg.GetStdoutPath())); got != fmt.Sprint(tc.want) {
				t.Fatalf("task's network namespace inode = %s, want %d", got, tc.want)
			}
		})
	}
}

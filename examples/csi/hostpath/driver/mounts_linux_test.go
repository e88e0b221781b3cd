//go:build linux

package hostpath_test

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// requireMounts skips a test that needs bind mounts where they cannot be
// made, saying why.
func requireMounts(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root: run the test as root to exercise the node service")
	}
	src, dst := t.TempDir(), t.TempDir()
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mounts are not allowed here (%v): the node service needs CAP_SYS_ADMIN", err)
	}
	if err := unix.Unmount(dst, 0); err != nil {
		t.Fatalf("unmount probe mount: %v", err)
	}
}

// assertNoVolumeMounts fails when a mount under dir is left after a test.
func assertNoVolumeMounts(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("mount left behind: %s", line)
		}
	}
}

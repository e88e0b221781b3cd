// Package proctest holds process helpers shared by the tests of several
// core packages (a test helper package: nothing in production imports it).
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Stop sends SIGSTOP to pid and waits until every thread of it is stopped:
// the kernel wakes one thread to begin the group stop, and on a loaded
// machine the others may run on (and answer a call) meanwhile.
func Stop(t testing.TB, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !allThreadsStopped(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not stop", pid)
		}
		<-tick.C
	}
}

func allThreadsStopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			return false
		}
		// The state follows the parenthesised command name.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// KillUnder registers a cleanup that kills (SIGKILL, with its process
// group) every process whose working directory is under dir once the test
// is over: task processes a client leaves running by design, which a test
// that failed half-way would otherwise leave behind to load the machine.
func KillUnder(t testing.TB, dir string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			pids := procsUnder(root)
			if len(pids) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Errorf("processes under %s still running: %v", dir, pids)
				return
			}
			for _, pid := range pids {
				_ = syscall.Kill(-pid, syscall.SIGKILL) // its group, when it leads one
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			<-tick.C // until they are gone
		}
	})
}

// procsUnder lists the live processes whose working directory is root or
// under it (zombies have none).
func procsUnder(root string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil {
			continue
		}
		if cwd == root || strings.HasPrefix(cwd, root+string(filepath.Separator)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

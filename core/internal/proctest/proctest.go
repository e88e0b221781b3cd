// Package proctest holds process helpers shared by the tests of several
// core packages (a test helper package: nothing in production imports it).
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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

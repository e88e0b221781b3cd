//go:build linux

package rawexec

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// startTask starts the task's command: in its cgroup when it has one,
// and in the allocation's network namespace when spec names one. A
// process is born in the network namespace of the thread that forks it,
// so the fork happens on a thread of its own that joined the namespace,
// and goes home after (a thread that cannot is thrown away).
func startTask(spec *shimSpec, cmd *exec.Cmd, forkMu *sync.Mutex) (*exec.Cmd, error) {
	start := func() (*exec.Cmd, bool, error) {
		switch {
		case spec.Cgroup == nil:
			return cmd, false, cmd.Start()
		case spec.NetNS != "" && !spec.Cgroup.V2:
			// startInCgroup would fork on another thread, out of the
			// namespace: fork on this one.
			err, stranded := spec.Cgroup.forkFromThread(cmd)
			return cmd, stranded, err
		default:
			c, err := startInCgroup(cmd, spec.Cgroup, forkMu)
			return c, false, err
		}
	}
	if spec.NetNS == "" {
		c, _, err := start()
		return c, err
	}
	type result struct {
		cmd *exec.Cmd
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{cmd, fmt.Errorf("open the supervisor's network namespace: %w", err)}
			return
		}
		defer home.Close()
		target, err := os.Open(spec.NetNS)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{cmd, fmt.Errorf("open the allocation's network namespace: %w", err)}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{cmd, fmt.Errorf("join the allocation's network namespace %s: %w", spec.NetNS, err)}
			return
		}
		c, stranded, err := start()
		if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil && !stranded {
			runtime.UnlockOSThread()
		}
		// Otherwise the thread stays locked and ends with this goroutine.
		done <- result{c, err}
	}()
	r := <-done
	return r.cmd, r.err
}

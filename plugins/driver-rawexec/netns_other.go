//go:build unix && !linux

package rawexec

import (
	"errors"
	"os/exec"
	"sync"
)

// startTask starts the task's command, in its cgroup when it has one.
// Network namespaces exist on Linux only.
func startTask(spec *shimSpec, cmd *exec.Cmd, forkMu *sync.Mutex) (*exec.Cmd, error) {
	if spec.NetNS != "" {
		return cmd, errors.New("network namespaces exist on Linux only")
	}
	if spec.Cgroup == nil {
		return cmd, cmd.Start()
	}
	return startInCgroup(cmd, spec.Cgroup, forkMu)
}

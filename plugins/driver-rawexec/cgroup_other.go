//go:build unix && !linux

package rawexec

import (
	"os/exec"
	"runtime"
)

// cgroupHost exists only on Linux; elsewhere detection always fails and
// the driver runs tasks without cgroups only where no_cgroups allows it.
type cgroupHost struct{ v2 bool }

func detectCgroups(string) (*cgroupHost, error) {
	return nil, noCgroupsErr("cgroups do not exist on %s", runtime.GOOS)
}

const cgroupRoot = ""

func (h *cgroupHost) create(string, cgroupResources) (*taskCgroup, error) {
	return nil, noCgroupsErr("cgroups do not exist on %s", runtime.GOOS)
}

func (cg *taskCgroup) join() (func() error, error) {
	return nil, noCgroupsErr("cgroups do not exist on %s", runtime.GOOS)
}

func (cg *taskCgroup) startFromThread(*exec.Cmd) error {
	return noCgroupsErr("cgroups do not exist on %s", runtime.GOOS)
}

func (cg *taskCgroup) startInto(*exec.Cmd) (*exec.Cmd, bool, error) { return nil, false, nil }

func (cg *taskCgroup) killAll() error  { return nil }
func (cg *taskCgroup) oomKilled() bool { return false }
func (cg *taskCgroup) destroy() error  { return nil }

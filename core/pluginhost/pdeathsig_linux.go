package pluginhost

import (
	"os/exec"
	"syscall"
)

// dieWithHost asks the kernel to send the plugin SIGTERM when the agent
// dies, however it dies: a SIGKILLed agent must not leave plugin processes
// behind. (Task processes are unaffected: the raw_exec driver starts them
// through a shim in a session of their own, so they outlive the plugin.)
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

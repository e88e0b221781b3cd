package pluginhost

import (
	"os/exec"
	"syscall"
)

// dieWithHost asks the kernel to send the plugin SIGTERM when the agent
// dies, however it dies: a SIGKILLed agent must not leave plugin processes
// behind. (Task processes are unaffected: the raw_exec driver starts them
// through a shim in a session of their own, so they outlive the plugin.)
//
// The plugin also gets a process group of its own, which killGroup ends
// as a whole: a plugin that is a script starting the real binary (or any
// child) would otherwise leave the child holding go-plugin's stdout and
// stderr pipes, and go-plugin's Kill waits for those to close, so a hung
// child held up the launch that gave up on it for as long as it lived.
func dieWithHost(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
}

// killGroup sends SIGKILL to the process group of the plugin whose pid
// leads it (dieWithHost made it so).
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // ESRCH once it is gone
	}
}

//go:build !linux

package pluginhost

import "os/exec"

// dieWithHost is a no-op where the kernel offers no parent-death signal.
func dieWithHost(*exec.Cmd) {}

// killGroup is a no-op where dieWithHost made no process group.
func killGroup(int) {}

//go:build !linux

package pluginhost

import "os/exec"

// dieWithHost is a no-op where the kernel offers no parent-death signal.
func dieWithHost(*exec.Cmd) {}

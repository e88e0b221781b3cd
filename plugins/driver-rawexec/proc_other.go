//go:build unix && !linux

package rawexec

import (
	"errors"
	"syscall"
)

// Without /proc the driver cannot tell a recycled pid from its task; these
// fall back to plain liveness. Fingerprint reports raw_exec unsupported
// here, so they only keep the package building.

func procStartTicks(int) uint64 { return 0 }

func procAlive(pid int, _ uint64) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func pidReused(int, uint64) bool { return false }

func bootID() string { return "" }

//go:build !unix

package driver

import "syscall"

// signalsByName is the portable subset outside unix.
var signalsByName = map[string]syscall.Signal{
	"SIGINT":  syscall.SIGINT,
	"SIGKILL": syscall.SIGKILL,
	"SIGTERM": syscall.SIGTERM,
}

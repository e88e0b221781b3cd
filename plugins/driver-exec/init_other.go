//go:build !linux

package execdriver

import (
	"fmt"
	"os"
)

func runInit() int {
	fmt.Fprintln(os.Stderr, "exec driver: tasks run on Linux only")
	return 126
}

//go:build !linux

package driver

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// StartFunc starts cmd and returns the command that started.
type StartFunc func(cmd *exec.Cmd) (*exec.Cmd, error)

// RunExecCmd is Linux-only.
func RunExecCmd(context.Context, *exec.Cmd, bool, *driverpb.TerminalSize, ExecIO, StartFunc) (*driverpb.ExitResult, error) {
	return nil, fmt.Errorf("%w on %s", ErrExecUnsupported, runtime.GOOS)
}

//go:build !linux

package execdriver

import (
	"context"
	"fmt"
	"runtime"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// ExecTask is Linux-only, as the driver.
func (d *Driver) ExecTask(context.Context, *driverpb.ExecTaskStart, driver.ExecIO) (*driverpb.ExitResult, error) {
	return nil, fmt.Errorf("%w on %s", driver.ErrExecUnsupported, runtime.GOOS)
}

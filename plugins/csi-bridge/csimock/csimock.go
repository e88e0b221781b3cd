// Package csimock serves csi-test's gomock CSI servers (identity,
// controller and node) on a real unix socket, for fault-injection tests of
// the csi-bridge and of its callers. A test sets expectations on the mocks
// and can stop the driver (its socket file goes) and start it again on the
// same path, as a driver process that dies and is restarted.
//
// It is for tests only; it imports nothing of drover.
package csimock

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/driver"
	"go.uber.org/mock/gomock"
)

// Driver is a mock CSI driver listening on Socket.
type Driver struct {
	Ctrl       *gomock.Controller
	Identity   *driver.MockIdentityServer
	Controller *driver.MockControllerServer
	Node       *driver.MockNodeServer
	// Socket is the driver's unix socket, in a short directory of its own
	// (unix socket paths are limited to about 108 bytes, which t.TempDir
	// paths can exceed).
	Socket string

	t   testing.TB
	mu  sync.Mutex
	srv *driver.MockCSIDriver
}

// New starts a mock driver; it is stopped, its mocks' expectations
// checked and its directory removed when the test ends.
func New(t testing.TB) *Driver {
	t.Helper()
	dir, err := os.MkdirTemp("", "csim")
	if err != nil {
		t.Fatal(err)
	}
	ctrl := gomock.NewController(reporter{t})
	d := &Driver{
		Ctrl:       ctrl,
		Identity:   driver.NewMockIdentityServer(ctrl),
		Controller: driver.NewMockControllerServer(ctrl),
		Node:       driver.NewMockNodeServer(ctrl),
		Socket:     filepath.Join(dir, "csi.sock"),
		t:          t,
	}
	// Cleanups run last in, first out: the server stops, then the
	// directory goes, then gomock's Finish (registered by NewController)
	// checks the expectations.
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	t.Cleanup(d.Stop)
	d.Start()
	return d
}

// Start serves the mocks on Socket; it is a no-op while serving.
func (d *Driver) Start() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.srv != nil {
		return
	}
	srv := driver.NewMockCSIDriver(&driver.MockCSIDriverServers{
		Identity: d.Identity, Controller: d.Controller, Node: d.Node,
	})
	if err := srv.StartOnAddress("unix", d.Socket); err != nil {
		d.t.Fatalf("start the mock CSI driver on %s: %v", d.Socket, err)
	}
	d.srv = srv
}

// Stop stops the driver as if its process died: open connections are
// closed, calls in flight see their context cancelled, and the socket
// file is removed. It is a no-op while stopped.
func (d *Driver) Stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.srv == nil {
		return
	}
	// Stop, not Close: Close also closes a client connection that only
	// Nexus makes.
	d.srv.Stop()
	d.srv = nil
	if err := os.Remove(d.Socket); err != nil && !os.IsNotExist(err) {
		d.t.Errorf("remove %s: %v", d.Socket, err)
	}
}

// reporter is gomock's reporter. gomock reports an unexpected call with
// Fatalf from the goroutine serving the RPC, not the test's: it marks the
// test failed and ends that goroutine (the RPC then never answers; the
// caller's deadline ends it) instead of calling FailNow off the test
// goroutine.
type reporter struct{ testing.TB }

func (r reporter) Fatalf(format string, args ...any) {
	r.Helper()
	r.Errorf("%s", fmt.Sprintf(format, args...))
	runtime.Goexit()
}

package hostpath_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	hostpath "github.com/drover-org/drover/examples/csi/hostpath/driver"
)

// testLogger sends the driver's logs to the test's log, shown on failure.
func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "hostpath", Level: hclog.Debug, Output: testWriter{t}})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// newDriver builds a monolith driver on stateDir without serving it.
func newDriver(t *testing.T, stateDir string, known ...string) *hostpath.Driver {
	t.Helper()
	d, err := hostpath.New(hostpath.Config{
		NodeID:     "node-a",
		KnownNodes: known,
		StateDir:   stateDir,
		Logger:     testLogger(t),
	})
	if err != nil {
		t.Fatalf("new driver: %v", err)
	}
	return d
}

// startDriver serves a monolith driver on a unix socket in a temp dir and
// stops it when the test ends.
func startDriver(t *testing.T, stateDir string, maxVolumes int64) (*hostpath.Driver, string) {
	t.Helper()
	d, err := hostpath.New(hostpath.Config{
		NodeID:            "node-a",
		StateDir:          stateDir,
		MaxVolumesPerNode: maxVolumes,
		Logger:            testLogger(t),
	})
	if err != nil {
		t.Fatalf("new driver: %v", err)
	}
	sock := filepath.Join(t.TempDir(), "csi.sock")
	lis, err := hostpath.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := d.NewGRPCServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		hostpath.GracefulStop(srv, 5*time.Second)
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return d, sock
}

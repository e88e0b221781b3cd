package docker

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// serveEnvVar makes the test binary serve the driver as a plugin process,
// so a test can kill that process and recover its tasks in another.
const serveEnvVar = "DROVER_DOCKER_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnvVar) != "" {
		Serve()
		os.Exit(0)
	}
	code := m.Run()
	// The engine client the tests share for setup and checks is closed
	// here; every driver closed its own in Shutdown.
	if engineCli != nil {
		_ = engineCli.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

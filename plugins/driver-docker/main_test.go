package docker

import (
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
	// The docker client's idle HTTP connections are the client's, closed
	// with it, but its transport's reader goroutines may linger briefly.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

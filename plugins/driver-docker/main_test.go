package docker

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The docker client's idle HTTP connections are the client's, closed
	// with it, but its transport's reader goroutines may linger briefly.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

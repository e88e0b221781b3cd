package client

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

// TestMain lets the test binary stand in for the raw_exec task shim: the
// driver re-executes os.Executable() with rawexec.ShimEnvVar set, and
// rawexec.Serve runs the shim (and exits) in that case.
func TestMain(m *testing.M) {
	if os.Getenv(rawexec.ShimEnvVar) != "" {
		rawexec.Serve()
		os.Exit(0)
	}
	// The raw_exec drivers run in process here: each test lets its
	// driver's task supervisor go at its end (newRawExec).
	goleak.VerifyTestMain(m)
}

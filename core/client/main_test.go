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
	// The raw_exec driver runs in process here, with no plugin process
	// whose exit would end it: its task supervisor is let go 5 s after its
	// last task by a timer whose goroutine then reaps the supervisor
	// process. When that timer fires as the package's last tests end, the
	// reaping can outlast goleak's retries; it ends with the supervisor.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/drover-org/drover/plugins/driver-rawexec.(*supervisor).end"))
}

package cluster

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/test/internal/harness"
)

var (
	// droverBin is the binary TestMain built for this run ("" when the
	// build failed, see buildErr).
	droverBin string
	// repoRoot is the module root, where examples/jobs lives.
	repoRoot string
	// buildErr says why there is no binary.
	buildErr error
)

// TestMain builds drover once for every test. Without a binary there is
// nothing to run: every test skips and says why (see needBinary).
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testtier.SkipSuite("test/cluster builds drover and runs clusters of agent processes") {
		return 0
	}
	bin, root, cleanup, err := harness.Build()
	if err != nil {
		buildErr = err
	} else {
		defer cleanup()
		droverBin, repoRoot = bin, root
	}
	defer harness.RemoveBuilt()
	code := m.Run()
	// Every agent, CLI run, HTTP connection and workload goroutine ends
	// with its test; a goroutine still alive here is a leak in the harness.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "cluster: goroutine leak: %v\n", err)
			code = 1
		}
	}
	return code
}

// needBinary skips the test when TestMain could not build drover.
func needBinary(t *testing.T) {
	t.Helper()
	if buildErr != nil {
		t.Skipf("cluster tests need the drover binary, which did not build: %v", buildErr)
	}
}

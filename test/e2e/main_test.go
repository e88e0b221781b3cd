package e2e

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/test/internal/harness"
)

var (
	// droverBin is the binary TestMain built for this run.
	droverBin string
	// repoRoot is the module root, where examples/jobs lives.
	repoRoot string
)

// TestMain builds drover once for every test and removes it afterwards. A
// failed build fails the whole run loudly: nothing here can be tested
// without the binary.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testtier.SkipSuite("test/e2e builds drover and runs it as agent processes") {
		return 0
	}
	// The tests wait on agent processes far more than they compute: four
	// at a time, not -parallel's default of one per CPU.
	harness.DefaultParallel(4)
	bin, root, cleanup, err := harness.Build()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FATAL: %v\n", err)
		return 1
	}
	defer cleanup()
	defer harness.RemoveBuilt()
	droverBin, repoRoot = bin, root

	code := m.Run()
	// Every agent, CLI run and HTTP connection is closed by the tests'
	// cleanups; a goroutine still alive here is a leak in the harness.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: goroutine leak: %v\n", err)
			code = 1
		}
	}
	return code
}

// Package bench holds drover's benchmarks: the sysbatch scheduler over
// simulated nodes (in process and through the out-of-process plugin), the
// dev agent's start time, and a one-node job from submit to complete.
// Run them with `make bench`.
package bench

import (
	"fmt"
	"os"
	"testing"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/plugins/builtin"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

// pluginEnv makes a re-executed test binary serve a built-in plugin, the
// way `drover __plugin <name>` does.
const pluginEnv = "DROVER_BENCH_PLUGIN=1"

func TestMain(m *testing.M) {
	if os.Getenv(rawexec.ShimEnvVar) != "" {
		rawexec.Serve() // the raw_exec task shim re-executes this binary
		os.Exit(0)
	}
	if os.Getenv("DROVER_BENCH_PLUGIN") != "" && len(os.Args) > 2 && os.Args[1] == pluginhost.ServeCommand {
		p, ok := builtin.Lookup(os.Args[2])
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown plugin %q\n", os.Args[2])
			os.Exit(1)
		}
		p.Serve()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

package ui_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/pluginhost"
	hostpath "github.com/drover-org/drover/examples/csi/hostpath/driver"
	"github.com/drover-org/drover/plugins/builtin"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
)

const (
	// pluginEnv marks the test binary's re-executions as the dev agent's
	// built-in plugins.
	pluginEnv = "DROVER_UI_TEST_PLUGIN"
	// hostpathEnv makes the test binary, run as a raw_exec task, the
	// repository's hostpath CSI driver.
	hostpathEnv = "DROVER_UI_TEST_HOSTPATH"
)

// TestMain lets the test binary stand in for the drover binary and for
// the hostpath CSI driver: the dev agent of the browser tests
// re-executes it as `<exe> __plugin <name>` with pluginEnv set (and the
// raw_exec driver as its task shim, with rawexec.ShimEnvVar), and a
// raw_exec task runs it with hostpathEnv set. Either way it serves that
// instead of running the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == pluginhost.ServeCommand && (os.Getenv(pluginEnv) != "" || os.Getenv(rawexec.ShimEnvVar) != "") {
		p, ok := builtin.Lookup(os.Args[2])
		if !ok {
			fmt.Fprintf(os.Stderr, "no built-in plugin %q\n", os.Args[2])
			os.Exit(1)
		}
		p.Serve()
		os.Exit(0)
	}
	if os.Getenv(hostpathEnv) != "" {
		if err := serveHostpath(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "hostpath:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveHostpath runs the hostpath CSI driver in monolith mode on the
// socket the client gives its plugin task (CSI_ENDPOINT) until SIGTERM.
func serveHostpath(args []string) error {
	fl := flag.NewFlagSet("hostpath", flag.ContinueOnError)
	stateDir := fl.String("state-dir", "", "")
	nodeID := fl.String("node-id", "", "")
	if err := fl.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sock, err := hostpath.ParseEndpoint(os.Getenv("CSI_ENDPOINT"))
	if err != nil {
		return err
	}
	d, err := hostpath.New(hostpath.Config{NodeID: *nodeID, StateDir: *stateDir, Mode: hostpath.ModeMonolith,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "hostpath", Output: os.Stderr})})
	if err != nil {
		return err
	}
	lis, err := hostpath.Listen(sock)
	if err != nil {
		return err
	}
	srv := d.NewGRPCServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		hostpath.GracefulStop(srv, 10*time.Second)
		<-served
		return nil
	case err := <-served:
		return err
	}
}

// Command drover-csi-hostpath is drover's hostpath CSI driver: volumes are
// directories under -state-dir, bind-mounted into tasks. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	hostpath "github.com/drover-org/drover/examples/csi/hostpath/driver"
)

// stopTimeout bounds how long RPCs in flight may run after SIGTERM.
const stopTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "drover-csi-hostpath:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends (SIGTERM or SIGINT in main), then stops
// gracefully: RPCs in flight get stopTimeout to finish.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	host, _ := os.Hostname()
	fl := flag.NewFlagSet("drover-csi-hostpath", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var (
		endpoint   = fl.String("endpoint", envOr("CSI_ENDPOINT", "unix:///csi/csi.sock"), "CSI endpoint: unix:///path/csi.sock or a bare socket path (default from $CSI_ENDPOINT)")
		nodeID     = fl.String("node-id", host, "this node's CSI node ID")
		stateDir   = fl.String("state-dir", "/var/lib/drover-csi-hostpath", "directory for the volumes' data and the state files")
		volumesDir = fl.String("volumes-dir", "", "directory for the volumes' data, named volumes (default <state-dir>/volumes); may be shared by the drivers of several nodes")
		mode       = fl.String("mode", string(hostpath.ModeMonolith), "services to serve: monolith, controller or node")
		maxVolumes = fl.Int64("max-volumes-per-node", 0, "most volumes published to one node; 0 means no limit")
		knownNodes = fl.String("known-nodes", "", "comma-separated further node IDs the controller accepts (shared state directory only)")
		logLevel   = fl.String("log-level", "info", "log level: trace, debug, info, warn, error")
		version    = fl.Bool("version", false, "print the version and exit")
	)
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	if *version {
		fmt.Fprintln(stdout, hostpath.DriverName, hostpath.Version)
		return nil
	}
	level := hclog.LevelFromString(*logLevel)
	if level == hclog.NoLevel {
		return fmt.Errorf("unknown log level %q", *logLevel)
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "csi-hostpath", Level: level, Output: stderr})
	m, err := hostpath.ParseMode(*mode)
	if err != nil {
		return err
	}
	sock, err := hostpath.ParseEndpoint(*endpoint)
	if err != nil {
		return err
	}
	var known []string
	for _, n := range strings.Split(*knownNodes, ",") {
		if n = strings.TrimSpace(n); n != "" {
			known = append(known, n)
		}
	}
	d, err := hostpath.New(hostpath.Config{
		NodeID:            *nodeID,
		KnownNodes:        known,
		StateDir:          *stateDir,
		VolumesDir:        *volumesDir,
		Mode:              m,
		MaxVolumesPerNode: *maxVolumes,
		Logger:            logger,
	})
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
	logger.Info("serving", "endpoint", sock, "mode", m)

	select {
	case <-ctx.Done():
		logger.Info("stopping: signal received, finishing RPCs in flight", "deadline", stopTimeout)
		hostpath.GracefulStop(srv, stopTimeout)
		<-served
		_ = os.Remove(sock)
		return nil
	case err := <-served:
		return fmt.Errorf("serve %s: %w", sock, err)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

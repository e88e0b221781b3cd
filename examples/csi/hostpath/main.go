// Command drover-csi-hostpath is drover's hostpath CSI driver: volumes are
// directories under -state-dir, bind-mounted into tasks. See README.md.
package main

import (
	"errors"
	"flag"
	"fmt"
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
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "drover-csi-hostpath:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	host, _ := os.Hostname()
	fl := flag.NewFlagSet("drover-csi-hostpath", flag.ContinueOnError)
	var (
		endpoint   = fl.String("endpoint", envOr("CSI_ENDPOINT", "unix:///csi/csi.sock"), "CSI endpoint: unix:///path/csi.sock or a bare socket path (default from $CSI_ENDPOINT)")
		nodeID     = fl.String("node-id", host, "this node's CSI node ID")
		stateDir   = fl.String("state-dir", "/var/lib/drover-csi-hostpath", "directory for the volumes' data and the state files")
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
		fmt.Println(hostpath.DriverName, hostpath.Version)
		return nil
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:  "csi-hostpath",
		Level: hclog.LevelFromString(*logLevel),
	})
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

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	logger.Info("serving", "endpoint", sock, "mode", m)

	select {
	case sig := <-sigs:
		logger.Info("stopping", "signal", sig.String())
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

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/agent"
)

type agentCommand struct{}

func (agentCommand) Synopsis() string { return "Run a drover agent (server, client or both)" }

func (agentCommand) Run(args []string) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	dev := fs.Bool("dev", false, "run a server and a client in one process with in-memory state")
	var configPaths stringList
	fs.Var(&configPaths, "config", "agent config file (HCL or JSON, told by content) or directory of *.hcl and *.json files; repeatable, later ones override earlier ones")
	dataDir := fs.String("data-dir", "", "data directory (overrides the config)")
	bind := fs.String("bind", "", "address to bind to (overrides the config)")
	httpPort := fs.Int("http-port", 0, "HTTP API port (overrides the config)")
	rpcPort := fs.Int("rpc-port", 0, "RPC port (overrides the config)")
	logLevel := fs.String("log-level", "", "log level: trace, debug, info, warn, error")
	logJSON := fs.Bool("log-json", false, "log in JSON")
	pluginDir := fs.String("plugin-dir", "", "directory of third-party plugin binaries")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if !*dev && len(configPaths) == 0 {
		fmt.Fprintln(os.Stderr, "Must specify either -dev or -config")
		return 1
	}
	// As in Nomad, -dev supplies the defaults that -config files override.
	cfg, err := agent.LoadConfig(*dev, configPaths...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error loading agent config: %v\n", err)
		return 1
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
		cfg.SetByFlag("data_dir", "-data-dir")
	}
	if *bind != "" {
		cfg.BindAddr = *bind
		cfg.SetByFlag("bind_addr", "-bind")
	}
	if *httpPort != 0 {
		cfg.Ports.HTTP = *httpPort
		cfg.SetByFlag("ports.http", "-http-port")
	}
	if *rpcPort != 0 {
		cfg.Ports.RPC = *rpcPort
		cfg.SetByFlag("ports.rpc", "-rpc-port")
	}
	if *logLevel != "" {
		cfg.LogLevel = *logLevel
		cfg.SetByFlag("log_level", "-log-level")
	}
	if *logJSON {
		cfg.LogJSON = true
	}
	if *pluginDir != "" {
		cfg.PluginDir = *pluginDir
		cfg.SetByFlag("plugin_dir", "-plugin-dir")
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "Error loading agent config: %v\n", err)
		return 1
	}
	// An intercept logger, so that /v1/agent/monitor can stream it.
	logger := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name: "drover", Level: hclog.LevelFromString(cfg.LogLevel), JSONFormat: cfg.LogJSON, Output: os.Stderr,
	})
	// One line for each key of Nomad's config that drover does not serve.
	for _, w := range cfg.Warnings {
		logger.Warn("agent config key not served by drover; ignored", "key", w.Key, "at", w.Pos, "reason", w.Reason)
	}
	a, err := agent.New(cfg, agent.Options{Logger: logger, ConfigPaths: configPaths})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error starting agent: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stdout, "==> drover agent started! HTTP API on %s (dev mode: %v)\n", a.HTTPAddr(), cfg.DevMode)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	for {
		select {
		case err := <-a.Done():
			logger.Error("agent stopping", "error", err)
			fmt.Fprintf(os.Stderr, "Error: %v\n", err)
			a.Shutdown()
			return 1
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				// Only plugins whose binary or stanza changed are relaunched.
				if err := a.ReloadPlugins(ctx); err != nil {
					logger.Error("plugin reload failed", "error", err)
				}
				cancel()
				continue
			}
			logger.Info("caught signal; shutting down", "signal", sig.String())
			a.Shutdown()
			return 0
		}
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/client"
	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// Version is drover's version.
const Version = "0.1.0"

// Agent is a running drover agent.
type Agent struct {
	cfg    *Config
	logger hclog.Logger

	host   *pluginhost.Host
	server *server.Server
	client *client.Client
	http   *httpapi.HTTPServer
	httpLn net.Listener

	// Cluster mode: the RPC port's mux, the RPC server on it, and the
	// connection pool to other agents. A client-only agent serves HTTP
	// with plainHTTP (local client endpoints, the rest proxied).
	mux       *rpc.Mux
	rpcServer *rpc.Server
	pool      *rpc.Pool
	plainHTTP *http.Server

	// memberAddr is the host other agents reach this one on (advertised,
	// never a wildcard bind address), as /v1/agent/self reports it.
	memberAddr string

	tmpDir string
	done   chan error
}

// Options are what the caller supplies beyond the config.
type Options struct {
	Logger hclog.Logger
	// SelfExe is the drover binary that built-in plugins re-execute.
	SelfExe string
	// HTTPListener, when set, is used instead of listening on the config's
	// address (tests pass a :0 listener).
	HTTPListener net.Listener
	// PluginEnv is added to every built-in plugin's environment (tests).
	PluginEnv []string
	// HeartbeatTTL overrides the node heartbeat TTL (tests).
	HeartbeatTTL time.Duration
}

// New starts an agent: plugins, server, client, then the HTTP API.
func New(cfg *Config, opts Options) (_ *Agent, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Name: "drover", Level: hclog.LevelFromString(cfg.LogLevel), JSONFormat: cfg.LogJSON})
	}
	// Not the named result: `return nil, err` would nil it before the
	// deferred Shutdown, which must stop what was started so far.
	a := &Agent{cfg: cfg, logger: logger, done: make(chan error, 1)}
	defer func() {
		if err != nil {
			a.Shutdown()
		}
	}()
	if opts.SelfExe == "" {
		if opts.SelfExe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("locate drover binary: %w", err)
		}
	}
	dataDir := cfg.DataDir
	if cfg.DevMode && dataDir == "" {
		if a.tmpDir, err = os.MkdirTemp("", "drover-dev-"); err != nil {
			return nil, err
		}
		dataDir = a.tmpDir
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	drivers, err := a.startPlugins(ctx, opts)
	if err != nil {
		return nil, err
	}

	a.httpLn = opts.HTTPListener
	if a.httpLn == nil {
		httpAddr := net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Ports.HTTP))
		if a.httpLn, err = net.Listen("tcp", httpAddr); err != nil {
			return nil, fmt.Errorf("http listener: %w", err)
		}
	}
	advHTTP := advertiseAddr(cfg, a.httpLn.Addr().String(), cfg.Advertise.httpAddr())
	a.memberAddr, _, _ = net.SplitHostPort(advHTTP)

	// Outside dev mode agents talk over RPC: one port carries gRPC and Raft.
	var serverTLS, clientTLS *tls.Config
	if t := cfg.TLS; t != nil && t.RPC {
		name := "server." + cfg.Region + ".drover"
		if serverTLS, clientTLS, err = rpc.TLSConfig(t.CAFile, t.CertFile, t.KeyFile, t.VerifyServerHostname, name); err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
	}
	if !cfg.DevMode {
		a.pool = rpc.NewPool(clientTLS)
	}
	if cfg.Server != nil && cfg.Server.Enabled {
		if err := a.startServer(ctx, opts, dataDir, advHTTP, drivers.Names(), serverTLS, clientTLS); err != nil {
			return nil, err
		}
	}
	var remote *remoteServers
	if cfg.Client != nil && cfg.Client.Enabled {
		if remote, err = a.startClient(dataDir, advHTTP, drivers); err != nil {
			return nil, err
		}
	}
	a.startHTTP(remote)
	logger.Info("agent started", "http", a.httpLn.Addr().String(), "dev", cfg.DevMode, "version", Version)
	return a, nil
}

// startPlugins launches the built-in and configured plugins.
func (a *Agent) startPlugins(ctx context.Context, opts Options) (*driverSet, error) {
	hc := pluginhost.Config{
		Logger:   a.logger.Named("plugins"),
		SelfExe:  opts.SelfExe,
		CallWait: 5 * time.Second,
		Kinds: map[string]pluginhost.Kind{shared.KindDriver: {
			Plugin: &driver.Plugin{},
			// Info both proves the instance serves the driver kind and
			// discovers third-party driver binaries.
			Init: func(ctx context.Context, raw any, _ map[string]any) (any, error) {
				return raw.(driver.Driver).Info(ctx)
			},
		}},
		PluginDir: a.cfg.PluginDir,
	}
	for _, p := range builtin.Catalog {
		hc.Builtins = append(hc.Builtins, pluginhost.Builtin{Name: p.Name, Kind: p.Kind, Env: opts.PluginEnv})
	}
	for _, p := range a.cfg.Plugins {
		settings, err := p.PluginSettings()
		if err != nil {
			return nil, err
		}
		hc.Stanzas = append(hc.Stanzas, pluginhost.Stanza{Name: p.Name, Args: p.Args, Config: settings})
	}
	var err error
	if a.host, err = pluginhost.New(ctx, hc); err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	return newDriverSet(ctx, a.host)
}

// startServer starts the server; outside dev mode also its RPC port (the
// mux carrying gRPC and Raft) and its cluster settings.
func (a *Agent) startServer(ctx context.Context, opts Options, dataDir, advHTTP string, drivers []string, serverTLS, clientTLS *tls.Config) error {
	cfg := a.cfg
	sc := cfg.Server
	scfg := server.Config{
		Logger: a.logger, Region: cfg.Region, Datacenter: cfg.Datacenter, NodeName: cfg.NodeName,
		DevMode: cfg.DevMode, DataDir: filepath.Join(dataDir, "server"),
		RPCAddr:      net.JoinHostPort(advertiseHost(cfg.BindAddr), strconv.Itoa(cfg.Ports.RPC)),
		NumWorkers:   sc.NumSchedulers,
		Schedulers:   SchedulerRouter(a.host.Schedulers()),
		KnownDrivers: drivers,
		HeartbeatTTL: opts.HeartbeatTTL,
		HTTPAddr:     advHTTP,
		Version:      Version,
	}
	// Durations were validated when the config was parsed.
	if sc.HeartbeatGrace != "" {
		scfg.HeartbeatGrace, _ = time.ParseDuration(sc.HeartbeatGrace)
	}
	if sc.MinHeartbeatTTL != "" && scfg.HeartbeatTTL == 0 {
		scfg.HeartbeatTTL, _ = time.ParseDuration(sc.MinHeartbeatTTL)
	}
	if sc.RaftSnapshotThreshold > 0 {
		scfg.SnapshotThreshold = uint64(sc.RaftSnapshotThreshold)
	}
	if sc.RaftTrailingLogs > 0 {
		scfg.TrailingLogs = uint64(sc.RaftTrailingLogs)
	}
	if sc.RaftSnapshotInterval != "" {
		scfg.SnapshotInterval, _ = time.ParseDuration(sc.RaftSnapshotInterval)
	}
	if !cfg.DevMode {
		rpcLn, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Ports.RPC)))
		if err != nil {
			return fmt.Errorf("rpc listener: %w", err)
		}
		scfg.RPCAddr = advertiseAddr(cfg, rpcLn.Addr().String(), cfg.Advertise.rpcAddr())
		a.mux = rpc.NewMux(rpcLn, serverTLS, a.logger.Named("rpc"))
		layer, err := rpc.NewRaftLayer(a.mux.RaftListener(), rpc.HostPort(scfg.RPCAddr), clientTLS)
		if err != nil {
			return err
		}
		scfg.RaftLayer = layer
		scfg.RPCPool = a.pool
		scfg.BootstrapExpect = sc.BootstrapExpect
		if j := sc.ServerJoin; j != nil {
			scfg.RetryJoin = j.RetryJoin
			if j.RetryInterval != "" {
				scfg.RetryInterval, _ = time.ParseDuration(j.RetryInterval)
			}
		}
	}
	var err error
	if a.server, err = server.New(scfg); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	a.memberAddr, _, _ = net.SplitHostPort(scfg.RPCAddr)
	if a.mux != nil {
		a.rpcServer = rpc.NewServer(serverTLS, a.logger.Named("rpc"))
		a.server.RegisterRPC(a.rpcServer)
		go func() { _ = a.rpcServer.Serve(a.mux.GRPCListener()) }()
	}
	// A lone server is ready once it leads; a clustered one forms its
	// cluster in the background.
	if cfg.DevMode || (scfg.BootstrapExpect <= 1 && len(scfg.RetryJoin) == 0) {
		return a.server.WaitForLeader(ctx)
	}
	return nil
}

// startClient starts the client, talking to the local server in process or
// to the configured servers over RPC (the remote servers are returned).
func (a *Agent) startClient(dataDir, advHTTP string, drivers *driverSet) (*remoteServers, error) {
	cfg := a.cfg
	var (
		conn   client.ServerConn
		remote *remoteServers
		err    error
	)
	if a.server != nil {
		conn = a.server
	} else {
		if remote, err = newRemoteServers(a.pool, cfg.Client.Servers, a.logger.Named("client.rpc")); err != nil {
			return nil, err
		}
		conn = remote
	}
	cc := client.Config{
		Logger: a.logger, Region: cfg.Region, Datacenter: cfg.Datacenter, Name: cfg.NodeName,
		NodeClass: cfg.Client.NodeClass, NodePool: cfg.Client.NodePool, Meta: cfg.Client.Meta,
		Options: cfg.Client.Options, StateDir: cfg.Client.StateDir, AllocDir: cfg.Client.AllocDir,
		HTTPAddr: advHTTP, Server: conn, Drivers: drivers,
	}
	if cc.StateDir == "" {
		cc.StateDir = filepath.Join(dataDir, "client")
	}
	if cc.AllocDir == "" {
		cc.AllocDir = filepath.Join(dataDir, "alloc")
	}
	if a.client, err = client.New(cc); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if err := a.client.Start(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return remote, nil
}

// startHTTP serves the HTTP API: the full API with a server, or a
// client-only agent's local endpoints with the rest proxied to a server.
func (a *Agent) startHTTP(remote *remoteServers) {
	hcfg := httpapi.Config{Logger: a.logger.Named("http"), AgentSelf: a.self, NodeName: a.cfg.NodeName, ReloadPlugins: a.ReloadPlugins}
	if a.server != nil {
		hcfg.Server = &clusterServer{Server: a.server}
	}
	if a.client != nil {
		hcfg.Client = a.client
	}
	a.http = httpapi.New(hcfg)
	if a.server != nil {
		go func() { a.done <- a.http.Serve(a.httpLn) }()
		return
	}
	a.plainHTTP = &http.Server{Handler: clientOnlyHandler(a.http.Handler(), remote), ReadHeaderTimeout: 10 * time.Second}
	go func() { a.done <- a.plainHTTP.Serve(a.httpLn) }()
}

// HTTPAddr is the address the HTTP API listens on.
func (a *Agent) HTTPAddr() string { return a.httpLn.Addr().String() }

// Server is the agent's server, or nil.
func (a *Agent) Server() *server.Server { return a.server }

// Client is the agent's client, or nil.
func (a *Agent) Client() *client.Client { return a.client }

// Plugins is the agent's plugin host.
func (a *Agent) Plugins() *pluginhost.Host { return a.host }

// Done reports the HTTP server's end.
func (a *Agent) Done() <-chan error { return a.done }

// ReloadPlugins re-launches every plugin from its binary (SIGHUP).
func (a *Agent) ReloadPlugins(ctx context.Context) error { return a.host.Reload(ctx) }

func (a *Agent) self() any {
	member := map[string]any{"Name": a.cfg.NodeName, "Addr": a.memberAddr, "Port": a.cfg.Ports.RPC, "Status": "alive",
		"Tags": map[string]string{"region": a.cfg.Region, "dc": a.cfg.Datacenter, "build": Version}}
	stats := map[string]any{}
	if a.client != nil {
		stats["client"] = map[string]string{"node_id": a.client.NodeID()}
	}
	return map[string]any{
		"config": map[string]any{"Region": a.cfg.Region, "Datacenter": a.cfg.Datacenter, "DataDir": a.cfg.DataDir,
			"Version": map[string]string{"Version": Version}, "DevMode": a.cfg.DevMode,
			"Server": map[string]bool{"Enabled": a.server != nil}, "Client": map[string]bool{"Enabled": a.client != nil}},
		"member": member,
		"stats":  stats,
	}
}

// Shutdown stops the agent: HTTP, client, server, then plugins. Running
// tasks are stopped with the client only in dev mode.
func (a *Agent) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch {
	case a.plainHTTP != nil:
		_ = a.plainHTTP.Shutdown(ctx)
	case a.http != nil && a.server != nil:
		_ = a.http.Shutdown(ctx)
	case a.httpLn != nil:
		_ = a.httpLn.Close()
	}
	if a.client != nil {
		if a.cfg.DevMode {
			a.client.Destroy(ctx)
		} else {
			a.client.Shutdown()
		}
	}
	if a.server != nil {
		if err := a.server.Leave(); err != nil {
			a.logger.Warn("server shutdown", "error", err)
		}
	}
	if a.rpcServer != nil {
		a.rpcServer.Stop()
	}
	if a.mux != nil {
		_ = a.mux.Close()
	}
	if a.pool != nil {
		a.pool.Close()
	}
	if a.host != nil {
		_ = a.host.Close()
	}
	if a.tmpDir != "" {
		_ = os.RemoveAll(a.tmpDir)
	}
}

// advertiseAddr is the address other agents reach a listener on: the
// advertise setting (host or host:port) if any, else the bound address
// with a wildcard host replaced by loopback.
func advertiseAddr(cfg *Config, bound, advertise string) string {
	_, port, _ := net.SplitHostPort(bound)
	if advertise != "" {
		if _, _, err := net.SplitHostPort(advertise); err == nil {
			return advertise
		}
		return net.JoinHostPort(advertise, port)
	}
	host, _, _ := net.SplitHostPort(bound)
	return net.JoinHostPort(advertiseHost(host), port)
}

func (a *Advertise) httpAddr() string {
	if a == nil {
		return ""
	}
	return a.HTTP
}

func (a *Advertise) rpcAddr() string {
	if a == nil {
		return ""
	}
	return a.RPC
}

func advertiseHost(bind string) string {
	if bind == "" || bind == "0.0.0.0" || bind == "::" {
		return "127.0.0.1"
	}
	return bind
}

// SchedulerRouter adapts the plugin host's scheduler set to the server's
// scheduler router.
func SchedulerRouter(set *pluginhost.SchedulerSet) server.SchedulerRouter { return schedRouter{set} }

type schedRouter struct{ set *pluginhost.SchedulerSet }

func (r schedRouter) Lookup(t string) (scheduler.Scheduler, int, error) {
	s, info, err := r.set.Lookup(t)
	if err != nil {
		return nil, 0, err
	}
	return s, info.MaxAttempts, nil
}

func (r schedRouter) ServedTypes() []string { return r.set.ServedTypes() }

package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/client"
	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/metrics"
	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/scheduler"
)

// Version is drover's version.
const Version = "0.1.0"

// Agent is a running drover agent.
type Agent struct {
	cfg    *Config
	logger hclog.Logger

	host *pluginhost.Host
	// drivers are the drivers the host's driver plugins serve (read from
	// the plugin set in force at every use: a reload may add or remove one).
	drivers *pluginhost.DriverSet
	server  *server.Server
	// metrics is this agent's own registry (metrics.go).
	metrics *metrics.Metrics
	client  *client.Client
	http    *httpapi.HTTPServer
	httpLn  net.Listener

	// Cluster mode: the RPC port's mux, the RPC server on it, and the
	// connection pool to other agents. A client-only agent serves HTTP
	// with plainHTTP (local client endpoints, the rest proxied).
	mux       *rpc.Mux
	rpcServer *rpc.Server
	raftLayer *rpc.RaftLayer
	pool      *rpc.Pool
	plainHTTP *http.Server

	// httpsTLS is the HTTP API's server TLS config when tls.http is on;
	// httpsClient is how this agent reaches other agents' HTTPS APIs.
	httpsTLS    *tls.Config
	httpsClient *tls.Config
	proxyTr     *http.Transport // nil: http.DefaultTransport

	// memberAddr is the host other agents reach this one on (advertised,
	// never a wildcard bind address), as /v1/agent/self reports it.
	memberAddr string

	configPaths []string

	// rpcAuth is how RPC is authenticated (rpcAuthPKI, …), shown in
	// agent self and the member tags.
	rpcAuth string
	// pki is the agent's identity in the cluster PKI (nil: none); muxOpts
	// add its checks to the RPC port's mux.
	pki     *agentPKI
	muxOpts []rpc.MuxOption

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
	// ConfigPaths are the -config files and directories the config came
	// from. A plugin reload (SIGHUP, PUT /v1/agent/plugins/reload) reads
	// them again and relaunches the plugins whose stanza changed; without
	// them only plugins whose binary changed are relaunched.
	ConfigPaths []string
	// HeartbeatTTL overrides the node heartbeat TTL (tests).
	HeartbeatTTL time.Duration
	// LeaderWait bounds how long a lone server waits to lead before New
	// fails (default one minute).
	LeaderWait time.Duration
	// CertTTL overrides tls.cert_ttl, the lifetime of the certificates
	// this server issues (tests).
	CertTTL time.Duration
	// JoinWait bounds how long a joining agent tries its servers (default
	// five minutes).
	JoinWait time.Duration
}

// defaultLeaderWait bounds how long a lone server waits to lead at start.
const defaultLeaderWait = time.Minute

// New starts an agent: plugins, server, client, then the HTTP API. When a
// step fails, what the earlier steps started is stopped again (plugin
// processes, listeners, Raft stores and transport, the dev temp dir) and
// the step's error is returned.
func New(cfg *Config, opts Options) (*Agent, error) {
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "drover", Level: hclog.LevelFromString(cfg.LogLevel), JSONFormat: cfg.LogJSON})
	}
	// Room for the HTTP server's end and a server's fatal stop.
	a := &Agent{cfg: cfg, logger: logger, done: make(chan error, 2), configPaths: opts.ConfigPaths, metrics: metrics.New()}
	if err := a.start(opts); err != nil {
		a.Shutdown()
		return nil, err
	}
	logger.Info("agent started", "http", a.httpLn.Addr().String(), "https", a.httpsTLS != nil, "dev", cfg.DevMode, "version", Version)
	return a, nil
}

func (a *Agent) start(opts Options) error {
	cfg := a.cfg
	// The caller's listener is the agent's from here on: closed on failure
	// like one the agent opened.
	a.httpLn = opts.HTTPListener
	// Nothing starts on a config that breaks a rule: a bound exists to
	// keep what the setting would start from starting.
	if err := cfg.validate(); err != nil {
		return err
	}
	if opts.SelfExe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("locate drover binary: %w", err)
		}
		opts.SelfExe = exe
	}
	// Certificates are read before anything starts: a bad file is the
	// most common start-up error and costs nothing to report early.
	tlsCfgs, err := loadTLS(cfg)
	if err != nil {
		return err
	}
	a.httpsTLS = tlsCfgs.httpServer
	a.httpsClient = tlsCfgs.httpClient
	dataDir := cfg.DataDir
	if cfg.DevMode && dataDir == "" {
		if a.tmpDir, err = os.MkdirTemp("", "drover-dev-"); err != nil {
			return fmt.Errorf("dev data dir: %w", err)
		}
		dataDir = a.tmpDir
	}
	if usePKI(cfg) {
		auto, err := a.setupPKI(opts, dataDir)
		if err != nil {
			return err
		}
		tlsCfgs.rpcServer, tlsCfgs.rpcClient = auto.rpcServer, auto.rpcClient
		if tlsCfgs.httpServer == nil {
			tlsCfgs.httpServer, tlsCfgs.httpClient = auto.httpServer, auto.httpClient
		}
		a.httpsTLS = tlsCfgs.httpServer
		a.httpsClient = tlsCfgs.httpClient
	}
	a.rpcAuth = rpcAuthMode(cfg, tlsCfgs)
	if a.rpcAuth == rpcAuthNone {
		a.logger.Warn("INSECURE: RPC is plaintext and unauthenticated (tls { auto = false } without rpc = true and certificates): " +
			"anyone reaching the RPC port can join Raft, register nodes, deregister jobs and read allocations")
	}

	// The HTTP port is bound before the plugins start (seconds on a loaded
	// machine): a port chosen free a moment ago (Nomad's test harness) is
	// not taken meanwhile, and a caller that connects early waits in the
	// listen queue for the answer instead of being refused.
	if a.httpLn == nil {
		httpAddr := net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Ports.HTTP))
		if a.httpLn, err = net.Listen("tcp", httpAddr); err != nil {
			return fmt.Errorf("http listener: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.startPlugins(ctx, opts); err != nil {
		return err
	}

	advHTTP := advertiseAddr(cfg, a.httpLn.Addr().String(), cfg.Advertise.httpAddr())
	a.memberAddr, _, _ = net.SplitHostPort(advHTTP)

	// Outside dev mode agents talk over RPC: one port carries gRPC and Raft.
	// A dev agent opens it when its port is configured (listenDevRPC).
	if !cfg.DevMode || cfg.rpcPortSet() {
		a.pool = rpc.NewPool(tlsCfgs.rpcClient)
	}
	if cfg.Server != nil && cfg.Server.Enabled {
		if err := a.startServer(opts, dataDir, advHTTP, a.drivers.Names(), tlsCfgs.rpcServer, tlsCfgs.rpcClient); err != nil {
			return err
		}
	}
	var remote *remoteServers
	if cfg.Client != nil && cfg.Client.Enabled {
		if remote, err = a.startClient(dataDir, advHTTP); err != nil {
			return err
		}
	}
	if a.pki != nil {
		a.startRenewal(remote)
	}
	a.startHTTP(remote)
	return nil
}

// startPlugins launches the built-in and configured plugins, once the
// driver plugins have accepted the config of their Nomad stanzas.
func (a *Agent) startPlugins(ctx context.Context, opts Options) error {
	hc := pluginhost.Config{
		Logger:    a.logger.Named("plugins"),
		SelfExe:   opts.SelfExe,
		CallWait:  5 * time.Second,
		PluginDir: a.cfg.PluginDir,
	}
	if err := validateDriverConfigs(ctx, hc, a.cfg.Plugins, opts.PluginEnv); err != nil {
		return err
	}
	for _, p := range builtinPlugins {
		if !builtinLaunched(p.name, a.cfg) {
			continue
		}
		env := opts.PluginEnv
		if extra, err := builtinDriverEnv(p.name, a.cfg.Plugins, a.cfg.DevMode); err != nil {
			return err
		} else if extra != nil {
			env = append(slices.Clone(env), extra...)
		}
		switch p.name {
		case dockerPlugin:
			env = append(slices.Clone(env), dockerEnv(a.cfg.Plugins)...)
		case rawexecPlugin:
			// A disabled raw_exec still runs: it fingerprints as
			// undetected, with the reason, so `node status` tells why
			// nothing is placed on it.
			re, err := rawexecEnv(a.cfg.Plugins, a.cfg.DevMode)
			if err != nil {
				return err
			}
			env = append(slices.Clone(env), re...)
		}
		b := pluginhost.Builtin{Name: p.name, Kind: p.kind, Env: env, Lazy: true,
			Declare: pluginhost.BuiltinInProcess(p.name).Declare}
		switch p.name {
		case rawexecPlugin, dockerPlugin, execPlugin, mockPlugin:
			// Its own fingerprint code runs in the agent's process while
			// it is idle: the node is ready, with or without an engine,
			// and the plugin starts at its first task.
			b.Fingerprint = inProcessFingerprint(p.name, env)
		}
		hc.Builtins = append(hc.Builtins, b)
	}
	stanzas, err := pluginStanzas(a.cfg)
	if err != nil {
		return err
	}
	hc.Stanzas = stanzas
	if a.host, err = pluginhost.New(ctx, hc); err == nil {
		a.registerPluginMetrics()
	}
	if err != nil {
		return fmt.Errorf("plugins: %w", err)
	}
	a.drivers = a.host.Drivers()
	return nil
}

// pluginStanzas are the config's plugin stanzas for the plugin host, each
// with its config block's body: the host decodes it against the schema the
// plugin publishes and hands it over at every launch. A Nomad driver's
// stanza (raw_exec, docker) is the agent's own business.
func pluginStanzas(cfg *Config) ([]pluginhost.Stanza, error) {
	var out []pluginhost.Stanza
	for _, p := range cfg.Plugins {
		if _, ok := nomadDrivers[p.Name]; ok {
			continue // configures a built-in; the agent consumed it
		}
		body, err := p.ConfigBody()
		if err != nil {
			return nil, err
		}
		out = append(out, pluginhost.Stanza{Name: p.Name, Args: p.Args, Config: body})
	}
	return out, nil
}

// startServer starts the server; outside dev mode also its RPC port (the
// mux carrying gRPC and Raft) and its cluster settings.
func (a *Agent) startServer(opts Options, dataDir, advHTTP string, drivers []string, serverTLS, clientTLS *tls.Config) error {
	cfg := a.cfg
	sc := cfg.Server
	scfg := server.Config{
		Metrics: a.metrics,
		Logger:  a.logger, Region: cfg.Region, Datacenter: cfg.Datacenter, NodeName: cfg.NodeName,
		DevMode: cfg.DevMode, DataDir: filepath.Join(dataDir, "server"),
		RPCAddr:      net.JoinHostPort(advertiseHost(cfg.BindAddr), strconv.Itoa(cfg.Ports.RPC)),
		NumWorkers:   sc.NumSchedulers,
		Schedulers:   SchedulerRouter(a.host.Schedulers()),
		GC:           GCRouter(a.host),
		KnownDrivers: drivers,
		HeartbeatTTL: opts.HeartbeatTTL,
		HTTPAddr:     advHTTP,
		Version:      Version,
		ACLEnabled:   cfg.aclEnabled(),
		// The server shut itself down (a Raft entry it cannot apply):
		// the agent stops with its error.
		OnFatal: func(err error) {
			select {
			case a.done <- fmt.Errorf("server stopped: %w", err):
			default:
			}
		},
	}
	sc.applySchedulerLimits(&scfg)
	scfg.DefaultServiceProvider = sc.defaultServiceProvider()
	scfg.GCConfig = sc.gcConfig()
	snapSched, serr := sc.snapshotSchedule(cfg.DataDir)
	if serr != nil {
		return serr
	}
	scfg.ScheduledSnapshot = snapSched
	// Checked when the config was parsed.
	scfg.Autopilot, _ = cfg.autopilotConfig()
	// Durations were validated when the config was parsed.
	if sc.HeartbeatGrace != "" {
		scfg.HeartbeatGrace, _ = time.ParseDuration(sc.HeartbeatGrace)
	}
	if sc.MinHeartbeatTTL != "" && scfg.HeartbeatTTL == 0 {
		scfg.HeartbeatTTL, _ = time.ParseDuration(sc.MinHeartbeatTTL)
	}
	scfg.MaxHeartbeatsPerSecond = sc.MaxHeartbeatsPerSecond
	if sc.FailoverHeartbeatTTL != "" {
		scfg.FailoverHeartbeatTTL, _ = time.ParseDuration(sc.FailoverHeartbeatTTL)
	}
	if sc.RaftSnapshotThreshold > 0 {
		scfg.SnapshotThreshold = uint64(sc.RaftSnapshotThreshold)
	}
	if sc.RaftTrailingLogs > 0 {
		scfg.TrailingLogs = uint64(sc.RaftTrailingLogs)
	}
	scfg.RaftMultiplier = sc.RaftMultiplier
	if sc.RaftSnapshotInterval != "" {
		scfg.SnapshotInterval, _ = time.ParseDuration(sc.RaftSnapshotInterval)
	}
	if cfg.DevMode && cfg.rpcPortSet() {
		if err := a.listenDevRPC(&scfg, serverTLS); err != nil {
			return err
		}
	}
	if !cfg.DevMode {
		rpcLn, err := net.Listen("tcp", net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Ports.RPC)))
		if err != nil {
			return fmt.Errorf("rpc listener: %w", err)
		}
		scfg.RPCAddr = advertiseAddr(cfg, rpcLn.Addr().String(), cfg.Advertise.rpcAddr())
		a.mux = rpc.NewMux(rpcLn, serverTLS, a.logger.Named("rpc"), a.muxOpts...)
		layer, err := rpc.NewRaftLayer(a.mux.RaftListener(), rpc.HostPort(scfg.RPCAddr), clientTLS)
		if err != nil {
			return fmt.Errorf("raft transport: %w", err)
		}
		a.raftLayer = layer
		scfg.RaftLayer = layer
		scfg.RPCPool = a.pool
		scfg.BootstrapExpect = sc.BootstrapExpect
		if a.pki != nil {
			scfg.PKI = a.pki.serverPKIConfig()
		}
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
		if a.pki != nil {
			// Callers without a certificate: the join exchange only
			// (the mux splits them off with rpc.WithPublicSplit).
			go func() {
				_ = a.rpcServer.ServePublic(a.mux.PublicListener(), server.PublicMethods(), rpc.PublicLimits{})
			}()
		}
	}
	// A lone server is ready once it leads; a clustered one forms its
	// cluster in the background.
	if cfg.DevMode || (scfg.BootstrapExpect <= 1 && len(scfg.RetryJoin) == 0) {
		wait := opts.LeaderWait
		if wait <= 0 {
			wait = defaultLeaderWait
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := a.server.WaitForLeader(ctx); err != nil {
			if ferr := a.server.Failed(); ferr != nil {
				// Not a leader problem: the log holds an entry this
				// server cannot apply.
				return fmt.Errorf("server stopped: %w", ferr)
			}
			return fmt.Errorf("server: no cluster leader after %s: this server is configured alone (bootstrap_expect = 1, "+
				"no server_join), so its Raft state in %s most likely lists other servers it cannot reach or win a vote without; "+
				"if that data dir belonged to a cluster, start its other servers or configure server_join: %w",
				wait, filepath.Join(scfg.DataDir, "raft"), err)
		}
	}
	return nil
}

// startClient starts the client, talking to the local server in process or
// to the configured servers over RPC (the remote servers are returned).
func (a *Agent) startClient(dataDir, advHTTP string) (*remoteServers, error) {
	cfg := a.cfg
	var (
		conn   client.ServerConn
		remote *remoteServers
		err    error
	)
	if a.server != nil {
		conn = server.NewClientConn(a.server)
	} else {
		if remote, err = newRemoteServers(a.pool, cfg.Client.Servers, a.logger.Named("client.rpc")); err != nil {
			return nil, err
		}
		conn = remote
	}
	cc := client.Config{
		Metrics: a.metrics,
		Logger:  a.logger, Region: cfg.Region, Datacenter: cfg.Datacenter, Name: cfg.NodeName,
		NodeClass: cfg.Client.NodeClass, NodePool: cfg.Client.NodePool, Meta: cfg.Client.Meta,
		Options: cfg.Client.Options, StateDir: cfg.Client.StateDir, AllocDir: cfg.Client.AllocDir,
		HTTPAddr: advHTTP, Server: conn, Drivers: a.drivers, CSIBridge: a.host.CSIBridge(),
		NetworkInterface: cfg.Client.NetworkInterface, LoopbackNetwork: cfg.DevMode,
		MinDynamicPort: cfg.Client.MinDynamicPort, MaxDynamicPort: cfg.Client.MaxDynamicPort,
		ReservedResources: cfg.Client.reservedResources(),
		HostVolumes:       cfg.Client.hostVolumes(),
		Bridge:            cfg.Client.bridgeConfig(),
	}
	if a.pki != nil && a.pki.role == pki.RoleClient {
		// The node ID is the certificate's: servers let a client act for
		// that node only.
		cc.NodeID = a.pki.id
	}
	if cfg.Client.MaxKillTimeout != "" {
		// Validate checked it: a positive duration.
		cc.MaxKillTimeout, _ = time.ParseDuration(cfg.Client.MaxKillTimeout)
	}
	if cfg.Client.FingerprintInterval != "" {
		// Validate checked it: a positive duration.
		cc.FingerprintInterval, _ = time.ParseDuration(cfg.Client.FingerprintInterval)
	}
	if cc.StateDir == "" {
		cc.StateDir = filepath.Join(dataDir, "client")
	}
	if cc.AllocDir == "" {
		cc.AllocDir = filepath.Join(dataDir, "alloc")
	}
	if a.client, err = client.New(cc); err == nil {
		a.client.RegisterMetrics(a.metrics)
	}
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if err := a.client.Start(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return remote, nil
}

// startHTTP serves the HTTP API: the full API with a server, or a
// client-only agent's local endpoints with the rest proxied to a server.
// With tls.http it is served over HTTPS only.
func (a *Agent) startHTTP(remote *remoteServers) {
	hcfg := httpapi.Config{Logger: a.logger.Named("http"), AgentSelf: a.self, NodeName: a.cfg.NodeName, ReloadPlugins: a.reloadForAPI,
		Plugins: agentPlugins{a}, MaxBodyBytes: a.cfg.HTTPMaxBodyBytes,
		Metrics: a.metrics, Prometheus: a.cfg.prometheusMetrics(),
		// Nomad's -dev serves profiles as enable_debug does.
		EnableDebug: a.cfg.EnableDebug || a.cfg.DevMode}
	if sinks, ok := a.logger.(hclog.InterceptLogger); ok {
		hcfg.LogSinks = sinks
	}
	if a.server != nil {
		serveServer(&hcfg, a.server)
	}
	if a.client != nil {
		hcfg.Client = a.client
	}
	if a.server == nil && remote != nil {
		// A client-only agent authorizes what it serves itself (logs,
		// agent info, its plugins) with tokens resolved by a server.
		hcfg.Resolver = newClientACL(a.cfg.aclEnabled(), remote, a.cfg.aclTokenTTL())
	}
	if a.httpsTLS != nil {
		a.proxyTr = a.proxyTransport()
		hcfg.LeaderScheme, hcfg.LeaderTransport = a.httpScheme(), a.proxyTr
		a.httpLn = tls.NewListener(a.httpLn, a.httpsTLS)
	}
	a.http = httpapi.New(hcfg)
	if a.server != nil {
		go func() { a.done <- a.http.Serve(a.httpLn) }()
		return
	}
	// A nil *http.Transport inside the interface would not be nil to the
	// proxy: plain HTTP leaves the interface itself nil (the default).
	var proxyTr http.RoundTripper
	if a.proxyTr != nil {
		proxyTr = a.proxyTr
	}
	a.plainHTTP = &http.Server{
		Handler:           clientOnlyHandler(a.http.Handler(), remote, a.httpScheme(), proxyTr),
		ReadHeaderTimeout: 10 * time.Second,
	}
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

// Done reports the agent's end: the HTTP server's, or the server's fatal
// stop.
func (a *Agent) Done() <-chan error { return a.done }

func (a *Agent) self() any {
	member := map[string]any{"Name": a.memberName(), "Addr": a.memberAddr, "Port": a.cfg.Ports.RPC, "Status": "alive",
		"Tags": map[string]string{"region": a.cfg.Region, "dc": a.cfg.Datacenter, "build": Version, "rpc_auth": a.rpcAuth}}
	stats := map[string]any{"rpc": map[string]string{"auth": a.rpcAuth}}
	if a.client != nil {
		stats["client"] = map[string]string{"node_id": a.client.NodeID()}
	}
	return map[string]any{
		"config": map[string]any{"NodeName": a.nodeName(), "Region": a.cfg.Region, "Datacenter": a.cfg.Datacenter, "DataDir": a.cfg.DataDir,
			"Version": map[string]string{"Version": Version}, "DevMode": a.cfg.DevMode,
			"Server": map[string]bool{"Enabled": a.server != nil}, "Client": map[string]bool{"Enabled": a.client != nil}},
		"member": member,
		"stats":  stats,
	}
}

// memberName is the name this agent goes by: on a server, the name the
// members list shows for it (the Raft ID when no name is configured), so that
// Nomad's client can find itself in that list; otherwise the configured name
// or, as Nomad defaults it, the host name.
func (a *Agent) memberName() string {
	if a.server != nil {
		return a.server.Info().ID
	}
	return a.nodeName()
}

// nodeName is the configured name or, as Nomad defaults it, the host name.
func (a *Agent) nodeName() string {
	if a.cfg.NodeName != "" {
		return a.cfg.NodeName
	}
	host, _ := os.Hostname()
	return host
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
	if a.pki != nil {
		a.pki.stop()
	}
	if a.server != nil {
		if err := a.server.Leave(); err != nil {
			a.logger.Warn("server shutdown", "error", err)
		}
	}
	if a.rpcServer != nil {
		a.rpcServer.Stop()
	}
	if a.raftLayer != nil {
		_ = a.raftLayer.Close() // already closed by a started server's transport
	}
	if a.mux != nil {
		_ = a.mux.Close()
	}
	if a.pool != nil {
		a.pool.Close()
	}
	if a.proxyTr != nil {
		a.proxyTr.CloseIdleConnections()
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

func (r schedRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	info, ok := r.set.JobType(t)
	return info.Behavior, ok
}

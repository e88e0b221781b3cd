// Package httpapi serves Nomad's v1 HTTP API over drover's state store and
// server. Reads run as blocking queries against the state store directly;
// writes go through the Server interface, which owns Raft and forwarding.
// JSON keys are the Go field names of core/structs, as in Nomad, so Nomad's
// official client and tooling read drover's answers unchanged.
package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/metrics"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Server is what every part of the HTTP API needs of the drover server:
// the state store for reads and cluster facts for the status endpoints.
// The writes go to the area interfaces below (JobsAPI, NodesAPI, ...),
// which the agent fills from the server's endpoints (Config.Jobs, ...).
//
// Writes return errors whose kind (structs.ErrNotFound, ErrInvalid,
// *structs.ValidationError, ErrPermissionDenied, ErrNoLeader, …) decides the
// HTTP status through structs.HTTPStatus. Each goes through Raft, forwarded
// to the leader when needed.
type Server interface {
	State() *state.StateStore
	// LeaderAddr is the leader's RPC address ("127.0.0.1:4647"), or "" when
	// the cluster has no leader.
	LeaderAddr() string
	Region() string
	Datacenter() string
}

// JobsAPI is the job writes (/v1/jobs, /v1/job/<id>/*). Register and Plan
// receive the job as submitted, with only its namespace filled from the
// request; the server canonicalizes and validates it.
type JobsAPI interface {
	Register(ctx context.Context, job *structs.Job, enforceIndex bool, jobModifyIndex uint64) (*structs.JobRegisterResponse, error)
	Deregister(ctx context.Context, ns, jobID string, purge bool) (*structs.JobDeregisterResponse, error)
	Evaluate(ctx context.Context, ns, jobID string, opts structs.EvalOptions) (*structs.JobRegisterResponse, error)
	// Scale sets a group's count or records a scaling event (PUT
	// /v1/job/<id>/scale); Revert registers a kept version again (PUT
	// /v1/job/<id>/revert).
	Scale(ctx context.Context, ns, jobID string, req *structs.ScalingRequest) (*structs.JobRegisterResponse, error)
	Revert(ctx context.Context, ns, jobID string, version uint64, enforcePrior *uint64) (*structs.JobRegisterResponse, error)
	Dispatch(ctx context.Context, ns string, req *structs.JobDispatchRequest) (*structs.JobDispatchResponse, error)
	ForcePeriodic(ctx context.Context, ns, jobID string) (*structs.PeriodicForceResponse, error)
	Plan(ctx context.Context, job *structs.Job, diff bool) (*structs.JobPlanResponse, error)
}

// NodesAPI is the node writes (/v1/node/<id>/*) and allocation stops.
type NodesAPI interface {
	UpdateEligibility(ctx context.Context, nodeID, eligibility string) (*structs.NodeEligibilityUpdateResponse, error)
	UpdateDrain(ctx context.Context, nodeID string, spec *structs.DrainSpec, markEligible bool, meta map[string]string) (*structs.NodeEligibilityUpdateResponse, error)
	StopAlloc(ctx context.Context, allocID string) (*structs.AllocStopResponse, error)
}

// OperatorAPI is the operator writes.
type OperatorAPI interface {
	// SetSchedulerConfig replaces the scheduler configuration; with cas
	// only when the stored one is at index. It reports whether it wrote.
	SetSchedulerConfig(ctx context.Context, cfg *structs.SchedulerConfiguration, cas bool, index uint64) (bool, uint64, error)
}

// SystemAPI is /v1/system/*.
type SystemAPI interface {
	// ForceGC runs every core GC job now with the force threshold (PUT
	// /v1/system/gc); a follower forwards it to the leader.
	ForceGC(ctx context.Context) error
	// ReconcileJobSummaries rebuilds every job summary (PUT
	// /v1/system/reconcile/summaries); a follower forwards it.
	ReconcileJobSummaries(ctx context.Context) error
}

// Peerer is optionally implemented by a Server that knows the Raft peer set
// but is no Cluster; without either, /v1/status/peers answers with the
// leader alone.
type Peerer interface {
	Peers() []string
}

// ClientAPI is what the local client agent serves; Config.Client is nil on
// an agent that runs no client, and log requests are then forwarded to the
// node that runs the allocation.
type ClientAPI interface {
	// AllocLogs streams a task's log (logType "stdout"|"stderr") to w from
	// offset, relative to origin "start"|"end"; with follow it keeps
	// streaming until ctx ends. Unknown allocs or tasks are errors of kind
	// structs.ErrNotFound, returned before anything is written.
	AllocLogs(ctx context.Context, allocID, task, logType, origin string, offset int64, follow bool, w io.Writer) error
}

// Config wires an HTTPServer.
type Config struct {
	Server Server
	// The server's write areas. With a Server, Jobs, Nodes, Deployments,
	// Operator and System are required; each one left nil is taken from
	// the Server when it implements the interface. The others are
	// optional: nil answers their routes 501 (ACL ones 400, as ACLs off).
	Jobs        JobsAPI
	Nodes       NodesAPI
	Deployments DeploymentsAPI
	Operator    OperatorAPI
	System      SystemAPI
	Namespaces  NamespacesAPI
	NodePools   NodePoolsAPI
	Services    ServicesAPI
	CSI         CSIServer
	ACL         ACLServer
	ACLCRUD     ACLCRUDServer
	JoinTokens  JoinTokens
	// Variables serves Nomad Variables and the keyring (variables.go).
	Variables VariablesAPI
	JobTypes  JobTypes
	// Client serves /v1/client/* locally; nil forwards them to the node.
	Client ClientAPI
	Logger hclog.Logger
	// AgentSelf returns the body of GET /v1/agent/self. The CLI reads the
	// local node's ID from ["stats"]["client"]["node_id"] (as Nomad's does).
	// Nil serves a minimal body built from the Server's region and
	// datacenter.
	AgentSelf func() any
	// NodeName is this agent's name, reported as ServerName by
	// /v1/agent/members; empty, the leader names itself and a follower
	// leaves it blank.
	NodeName string
	// ReloadPlugins brings this agent's plugins in line with its config
	// and plugin_dir (PUT /v1/agent/plugins/reload without a name), as
	// SIGHUP does, and says what it added, removed and relaunched; nil
	// answers 501.
	ReloadPlugins func(ctx context.Context) (PluginsReload, error)
	// Plugins serves /v1/agent/plugins and reloads of one plugin; nil
	// answers 501.
	Plugins AgentPlugins
	// MaxBodyBytes caps a request body (413 above it); zero is
	// structs.DefaultMaxRequestBodyBytes.
	MaxBodyBytes int64
	// LeaderScheme and LeaderTransport reach the leader's HTTP API for
	// forwarded reads: "https" and a TLS transport when the agents serve
	// HTTPS; empty, plain HTTP with the default transport.
	LeaderScheme    string
	LeaderTransport http.RoundTripper
	// Resolver authorizes requests by their ACL token; nil takes the
	// Server's when it is a TokenResolver, else ACLs are off.
	Resolver TokenResolver
	// Events is this server's event buffer (/v1/event/stream); nil on an
	// agent without a server (501). EventHeartbeat overrides the 10 s
	// heartbeat, for tests.
	Events         *events.Buffer
	EventHeartbeat time.Duration
	// Metrics is the agent's registry (/v1/metrics, request metrics);
	// nil answers /v1/metrics 501. Prometheus serves
	// ?format=prometheus (telemetry.prometheus_metrics).
	Metrics    *metrics.Metrics
	Prometheus bool
	// LogSinks is the agent's logger, streamed by /v1/agent/monitor; nil
	// answers it 501.
	LogSinks LogSinks
	// EnableDebug serves /v1/agent/pprof/* when ACLs are off (with ACLs
	// it needs agent:write), as Nomad's enable_debug.
	EnableDebug bool
}

// HTTPServer serves the v1 API.
type HTTPServer struct {
	srv Server
	// The write areas, Config's.
	jobs        JobsAPI
	nodes       NodesAPI
	deployments DeploymentsAPI
	operator    OperatorAPI
	system      SystemAPI
	namespaces  NamespacesAPI
	nodePools   NodePoolsAPI
	services    ServicesAPI
	csi         CSIServer
	aclAPI      ACLServer
	aclCRUDs    ACLCRUDServer
	joinToks    JoinTokens
	variables   VariablesAPI
	jobTypes    JobTypes
	client      ClientAPI
	logger      hclog.Logger
	self        func() any
	reload      func(ctx context.Context) (PluginsReload, error)
	// plugins is Config.Plugins.
	plugins AgentPlugins
	// nodeName is Config.NodeName.
	nodeName string
	// maxBody is Config.MaxBodyBytes with its default applied.
	maxBody int64
	// leaderScheme and leaderTransport are Config's.
	leaderScheme    string
	leaderTransport http.RoundTripper
	handler         http.Handler
	// resolver is Config.Resolver (or the Server's); nil: ACLs off.
	resolver TokenResolver
	// patterns are the registered ServeMux patterns, for the ACL tests.
	patterns []string
	// ui serves the web UI (/ui/).
	ui http.Handler
	// query runs blocking reads; a field so that it is built once from the
	// state store and so that the read path has a single seam.
	query queryFunc
	// logHeartbeat overrides the idle interval of followed log streams.
	logHeartbeat time.Duration
	// events and eventHeartbeat are Config's.
	events         *events.Buffer
	eventHeartbeat time.Duration
	// metrics and prometheus are Config's.
	metrics    *metrics.Metrics
	prometheus bool
	// logSinks and enableDebug are Config's.
	logSinks    LogSinks
	enableDebug bool

	// stopping ends blocking queries and log streams when Shutdown starts,
	// so that long polls answer at once instead of holding the shutdown.
	stopping context.Context
	stop     context.CancelFunc

	mu   sync.Mutex
	http *http.Server
}

// New builds an HTTPServer; Serve starts it.
func New(cfg Config) *HTTPServer {
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &HTTPServer{
		srv:    cfg.Server,
		client: cfg.Client,
		logger: logger.Named("http"),
		self:   cfg.AgentSelf,
		reload: cfg.ReloadPlugins,

		plugins: cfg.Plugins,

		nodeName: cfg.NodeName,
		maxBody:  cfg.MaxBodyBytes,

		leaderScheme:    cfg.LeaderScheme,
		leaderTransport: cfg.LeaderTransport,

		events:         cfg.Events,
		eventHeartbeat: cfg.EventHeartbeat,
		metrics:        cfg.Metrics,
		prometheus:     cfg.Prometheus,
		logSinks:       cfg.LogSinks,
		enableDebug:    cfg.EnableDebug,
	}
	if s.leaderScheme == "" {
		s.leaderScheme = "http"
	}
	if s.maxBody <= 0 {
		s.maxBody = structs.DefaultMaxRequestBodyBytes
	}
	s.jobs = orFrom(cfg.Jobs, cfg.Server)
	s.nodes = orFrom(cfg.Nodes, cfg.Server)
	s.deployments = orFrom(cfg.Deployments, cfg.Server)
	s.operator = orFrom(cfg.Operator, cfg.Server)
	s.system = orFrom(cfg.System, cfg.Server)
	s.namespaces = orFrom(cfg.Namespaces, cfg.Server)
	s.nodePools = orFrom(cfg.NodePools, cfg.Server)
	s.services = orFrom(cfg.Services, cfg.Server)
	s.csi = orFrom(cfg.CSI, cfg.Server)
	s.aclAPI = orFrom(cfg.ACL, cfg.Server)
	s.aclCRUDs = orFrom(cfg.ACLCRUD, cfg.Server)
	s.joinToks = orFrom(cfg.JoinTokens, cfg.Server)
	s.variables = orFrom(cfg.Variables, cfg.Server)
	s.jobTypes = orFrom(cfg.JobTypes, cfg.Server)
	s.resolver = cfg.Resolver
	if tr, ok := cfg.Server.(TokenResolver); ok && s.resolver == nil {
		s.resolver = tr
	}
	if es, ok := cfg.Server.(interface{ Events() *events.Buffer }); ok && s.events == nil {
		s.events = es.Events()
	}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.query = storeQuery(cfg.Server)
	s.ui = s.uiHandler()
	s.handler = emptyJobID(s.routes(routeTable))
	return s
}

// emptyJobID answers a request naming an empty job ID (/v1/job//scale, as
// Nomad's client sends for Scale("")) with Nomad's 404, before the mux
// would clean the path into another route and redirect to it.
func emptyJobID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.EscapedPath(), "/v1/job//") {
			writeText(w, http.StatusNotFound, "job not found")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// orFrom is area when set, else srv when it implements the area's
// interface, else nil.
func orFrom[T comparable](area T, srv Server) T {
	var zero T
	if area != zero {
		return area
	}
	if a, ok := srv.(T); ok {
		return a
	}
	return zero
}

// Handler returns the API's handler, for tests and for embedding.
func (s *HTTPServer) Handler() http.Handler { return s.handler }

// Serve answers requests on ln until Shutdown; it returns nil after a
// graceful shutdown.
func (s *HTTPServer) Serve(ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          s.logger.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	s.mu.Lock()
	if s.stopping.Err() != nil {
		s.mu.Unlock()
		_ = ln.Close()
		return nil // shut down before it started
	}
	s.http = hs
	s.mu.Unlock()
	s.logger.Info("serving HTTP API", "addr", ln.Addr().String())
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting requests and waits for the running ones until ctx
// ends. Blocking queries answer at once with their current result, and log
// streams end.
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stop()
	hs := s.http
	s.mu.Unlock()
	if hs == nil {
		return nil
	}
	err := hs.Shutdown(ctx)
	if err != nil {
		// Long-polls outlived ctx: cut them off rather than leak them.
		_ = hs.Close()
	}
	return err
}

// logRequests logs every request at debug level, and failures at warn.
func (s *HTTPServer) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		r, route := withRoute(r)
		next.ServeHTTP(rec, r)
		if *route == "" {
			// Proxied to the leader, or no route matched (404/405).
			*route = "other"
		}
		s.metrics.HTTPRequest(*route, rec.status, time.Since(start))
		args := []any{"method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start)}
		if rec.status >= 500 {
			s.logger.Warn("request failed", args...)
		} else {
			s.logger.Debug("request", args...)
		}
	})
}

// statusRecorder remembers the status code and still lets streaming
// handlers flush.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Package server is drover's control plane: Raft, the endpoints that change
// state, and the leader's loops (eval broker, blocked evals, plan queue and
// applier, periodic dispatcher, heartbeats) plus the scheduler workers.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/fsm"
	"github.com/drover-org/drover/core/metrics"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/aclendpoint"
	"github.com/drover-org/drover/core/server/blockedevals"
	"github.com/drover-org/drover/core/server/csivolumes"
	"github.com/drover-org/drover/core/server/drainer"
	"github.com/drover-org/drover/core/server/evalbroker"
	"github.com/drover-org/drover/core/server/gcengine"
	"github.com/drover-org/drover/core/server/periodic"
	"github.com/drover-org/drover/core/server/pkiendpoint"
	"github.com/drover-org/drover/core/server/planapply"
	"github.com/drover-org/drover/core/server/planqueue"
	"github.com/drover-org/drover/core/server/raftstore"
	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/server/volumewatcher"
	"github.com/drover-org/drover/core/server/worker"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/scheduler"
)

// SchedulerRouter finds the scheduler plugin serving a job type. The plugin
// host implements it; tests may use an in-process router.
type SchedulerRouter interface {
	// Lookup returns the scheduler serving jobType and its attempt limit.
	// It returns an error wrapping structs.ErrUnavailable while the plugin
	// is restarting, so the worker hands the eval back for a later retry
	// without spending one of its deliveries; any other error means no
	// plugin serves the type right now, and the worker holds the eval
	// until one does (a reload may add it back; worker/hold.go).
	Lookup(jobType string) (scheduler.Scheduler, int, error)
	// ServedTypes lists the job types some plugin serves, sorted.
	ServedTypes() []string
	// JobType returns what the plugin serving jobType declares about it,
	// and whether any plugin serves jobType.
	JobType(jobType string) (structs.JobTypeBehavior, bool)
}

// Config configures a server.
type Config struct {
	Logger     hclog.Logger
	Region     string
	Datacenter string
	NodeName   string
	// DevMode keeps Raft in memory and tunes its timers for a fast start.
	DevMode bool
	// ACLEnabled turns on ACL token resolution (aclendpoint); off,
	// every caller is resolved to the management ACL.
	ACLEnabled bool
	// OneTimeTokenGCInterval is how often the leader removes expired
	// one-time tokens (default 10m).
	OneTimeTokenGCInterval time.Duration
	// DataDir holds raft/ (log and snapshots) outside dev mode.
	DataDir string
	// RPCAddr is the Raft transport address outside dev mode.
	RPCAddr string
	// NumWorkers is the number of scheduler workers (default 2).
	NumWorkers int
	Schedulers SchedulerRouter
	// GC hands the leader's core GC jobs their plugin (nil: nothing is
	// collected); GCConfig holds their thresholds and intervals.
	GC       GCRouter
	GCConfig GCConfig
	// Autopilot is the autopilot configuration the leader writes when the
	// cluster has none yet (the agent's autopilot block); nil: Nomad's
	// defaults until an operator sets one.
	Autopilot *structs.AutopilotConfig
	// ScheduledSnapshot, when set, has the leader write backups on a
	// schedule (snapshot_schedule.go).
	ScheduledSnapshot *SnapshotSchedule
	// SchedulerCallTimeout bounds one call to a scheduler plugin (default
	// DefaultSchedulerCallTimeout). A call that runs out is a failed
	// attempt: the eval is nacked and counts toward the delivery limit.
	SchedulerCallTimeout time.Duration
	// MaxAllocsPerJob bounds the allocations one job may ask for: the sum
	// over its groups of count, times the candidate nodes for job types
	// whose plugin places per node. A job above it is refused at submit
	// (default DefaultMaxAllocsPerJob).
	MaxAllocsPerJob int
	// MaxAllocsPerEval bounds the new allocations one eval's plan may
	// place; the rest stay queued for a follow-up eval (default
	// DefaultMaxAllocsPerEval).
	MaxAllocsPerEval int
	// DefaultServiceProvider is the provider given to a registered job's
	// services that name none: "consul" (Nomad's, the default), which
	// drover refuses, or "nomad" (job_validate.go).
	DefaultServiceProvider string
	// KnownDrivers lists drivers accepted at submit time in addition to
	// those fingerprinted on registered nodes.
	KnownDrivers []string
	// HeartbeatTTL is the floor of the node heartbeat TTL
	// (min_heartbeat_ttl; default 10s; dev 5s).
	HeartbeatTTL time.Duration
	// HeartbeatGrace is added to the TTL before a node is marked down.
	HeartbeatGrace time.Duration
	// MaxHeartbeatsPerSecond is the heartbeat rate the TTL grows to keep
	// (default 50); FailoverHeartbeatTTL every node's timer after a leader
	// change (default 5m). See package heartbeats.
	MaxHeartbeatsPerSecond float64
	FailoverHeartbeatTTL   time.Duration
	// Broker tunes the eval broker (defaults when zero).
	Broker evalbroker.Config
	// FailedEvalFollowupBaseline and FailedEvalFollowupRange delay the
	// follow-up of an eval failed at the delivery limit: due after the
	// baseline plus a random part of the range (defaults 1m and 5m, as
	// Nomad's; a negative range is none).
	FailedEvalFollowupBaseline time.Duration
	FailedEvalFollowupRange    time.Duration
	// SlowSchedulerCall is how long a scheduler plugin call may go
	// unanswered before its type is degraded and a spare worker stands in
	// for the worker it holds (default DefaultSlowSchedulerCall).
	SlowSchedulerCall time.Duration
	// RaftMultiplier scales Raft's timers outside dev mode (heartbeat and
	// election timeouts 1s, leader lease 500ms, commit timeout 50ms, each
	// times the multiplier), as Nomad's raft_multiplier: 1 (the default
	// when 0) is the fastest failover; a busy or slow machine wants more.
	// 1..MaxRaftMultiplier.
	RaftMultiplier int
	// RaftTiming, when set, replaces the scaled timers: for tests that
	// measure failover on purpose. Production leaves it nil.
	RaftTiming *RaftTiming
	// SnapshotThreshold and SnapshotInterval tune Raft log compaction.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	// TrailingLogs is how many entries a snapshot leaves in the log; a
	// follower further behind catches up by installing the snapshot.
	TrailingLogs uint64
	// Now is the clock, for tests of periodic jobs.
	Now func() time.Time
	// StepUpAttempts is how many times in a row a new leader tries to
	// establish itself (restore the eval broker, blocked evals and periodic
	// dispatcher) before handing leadership to another server (default 3).
	StepUpAttempts int
	// StepUpBackoff is the wait after the first failed attempt; it doubles
	// after each further one, up to 30s (default 1s).
	StepUpBackoff time.Duration
	// gcPacing, when set, replaces the garbage collector's batch sizes,
	// pauses and page bounds (tests).
	gcPacing *gcengine.Pacing
	// gcTrace, when set, is told of each GC step as it ends: what it was
	// ("page": building a page; "decide": the plugin's decision and its
	// checks; "entry": a reap entry's commit), when it started and how
	// long it took (benchmarks).
	gcTrace func(step string, start time.Time, d time.Duration)
	// stepUpFault, when set, runs in every step-up attempt after the
	// components are enabled; an error fails the attempt (tests).
	stepUpFault func() error

	// Metrics is the agent's metrics registry; nil observes nothing.
	Metrics *metrics.Metrics
	// EventBufferSize is how many Raft entries' events the server keeps
	// for /v1/event/stream (events.DefaultBufferSize when zero).
	EventBufferSize int

	// Clustering (ignored in dev mode).
	// BootstrapExpect is the number of servers that form the cluster.
	BootstrapExpect int
	// RetryJoin lists other servers' RPC addresses to form or join with.
	RetryJoin     []string
	RetryInterval time.Duration
	// RaftLayer carries Raft over the agent's multiplexed RPC port; when
	// nil, Raft listens on RPCAddr by itself.
	RaftLayer raft.StreamLayer
	// RPCPool connects to other servers (forwarding, joining, members).
	RPCPool *rpc.Pool
	// HTTPAddr is this agent's HTTP address, told to peers.
	HTTPAddr string
	// Version is the agent's version, told to peers.
	Version string
	// PKI is the server's part of the cluster PKI (nil: none); see pkiendpoint.
	PKI *PKIConfig
	// OnFatal is called once, after the server shut itself down because
	// it cannot go on: its FSM met a committed Raft entry it cannot apply.
	// The agent exits with the error. Nil: the server only shuts down.
	OnFatal func(error)
}

// Server is one drover server.
type Server struct {
	cfg    Config
	logger hclog.Logger

	// The ACL and PKI endpoints (acl_pki.go), served through ACL() and
	// PKI().
	acl *aclendpoint.ACL
	pki *pkiendpoint.PKI

	fsm       *fsm.FSM
	events    *events.Buffer
	raft      *raft.Raft
	raftStore interface{ Close() error }
	transport raft.Transport

	broker *evalbroker.Broker
	// writes tracks Raft writes other than the GC's, which GC steps
	// yield to.
	writes    *writeQuiet
	blocked   *blockedevals.BlockedEvals
	planQueue *planqueue.Queue
	plans     *planapply.Applier
	periodic  *periodic.Dispatcher
	heartbeat *heartbeater
	nodeCache *schedio.NodeCache
	workers   *worker.Pool
	// drainer advances node drains (its Run is a leader loop).
	drainer *drainer.Drainer
	// csi holds CSI volumes and claims, with the queue of CSI controller
	// calls for controller clients; volumes reaps released claims (both
	// leader-only).
	csi     *csivolumes.Volumes
	volumes *volumewatcher.Watcher

	// leaderMu guards leaderCancel and leaderWG: the leader loops' owner.
	leaderMu     sync.Mutex
	leaderCancel context.CancelFunc
	leaderWG     sync.WaitGroup
	// gc is this leadership term's garbage collector (nil when not
	// leading or without a GC plugin); guarded by leaderMu.
	gc *gcengine.Engine
	// established is set once a step-up completed and cleared on revoke:
	// during a failing attempt the components are briefly enabled.
	established atomic.Bool

	rpcPool *rpc.Pool

	// autopilot is the leader's view of the servers' health
	// (autopilot.go).
	autopilot autopilotTracker

	shutdownCtx    context.Context
	shutdownCancel context.CancelFunc
	wg             sync.WaitGroup

	// fatalCh carries the FSM's stop error from Raft's apply goroutine to
	// stopOnFatal, which shuts the server down.
	fatalCh      chan error
	shutdownOnce sync.Once
	shutdownErr  error
}

// New starts a server: it opens Raft, restores state and starts watching
// for leadership.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Region == "" {
		cfg.Region = structs.DefaultRegion
	}
	if cfg.Datacenter == "" {
		cfg.Datacenter = "dc1"
	}
	if cfg.NumWorkers <= 0 {
		cfg.NumWorkers = 2
	}
	if cfg.SchedulerCallTimeout <= 0 {
		cfg.SchedulerCallTimeout = DefaultSchedulerCallTimeout
	}
	if cfg.MaxAllocsPerJob <= 0 {
		cfg.MaxAllocsPerJob = DefaultMaxAllocsPerJob
	}
	if cfg.MaxAllocsPerEval <= 0 {
		cfg.MaxAllocsPerEval = DefaultMaxAllocsPerEval
	}
	if cfg.HeartbeatTTL <= 0 {
		cfg.HeartbeatTTL = 10 * time.Second
	}
	if cfg.HeartbeatGrace <= 0 {
		cfg.HeartbeatGrace = cfg.HeartbeatTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SlowSchedulerCall <= 0 {
		cfg.SlowSchedulerCall = DefaultSlowSchedulerCall
	}
	if cfg.FailedEvalFollowupBaseline <= 0 {
		cfg.FailedEvalFollowupBaseline = DefaultFailedEvalFollowupBaseline
	}
	if cfg.FailedEvalFollowupRange == 0 {
		cfg.FailedEvalFollowupRange = DefaultFailedEvalFollowupRange
	}
	if cfg.StepUpAttempts <= 0 {
		cfg.StepUpAttempts = defaultStepUpAttempts
	}
	if cfg.StepUpBackoff <= 0 {
		cfg.StepUpBackoff = defaultStepUpBackoff
	}
	if cfg.Schedulers == nil {
		return nil, errors.New("server: no scheduler router configured")
	}
	s := &Server{cfg: cfg, logger: cfg.Logger.Named("server"), rpcPool: cfg.RPCPool}
	s.shutdownCtx, s.shutdownCancel = context.WithCancel(context.Background())
	s.acl, s.pki = newACLEndpoint(s), newPKIEndpoint(s)
	s.broker = evalbroker.New(cfg.Broker, s.logger.Named("broker"))
	s.writes = newWriteQuiet()
	s.blocked = blockedevals.New(s.broker, s.logger.Named("blocked_evals"))
	s.planQueue = planqueue.New()
	s.plans = s.newPlanApplier()
	s.periodic = s.newPeriodicDispatcher()
	s.heartbeat = newHeartbeater(s)
	s.drainer = drainer.New(drainer.Config{State: s.State, Apply: s.raftApply, NewEval: s.newEval, Now: cfg.Now, Logger: s.logger})
	s.nodeCache = schedio.NewNodeCache()
	s.workers = newWorkers(s)
	s.csi = newCSIVolumes(s)
	s.volumes = volumewatcher.New(volumewatcher.Config{
		State: s.State, Unpublisher: s.csi, Logger: s.logger.Named("volume_watcher"),
	})

	f, err := fsm.New(s.logger.Named("fsm"), &leaderHooks{s: s})
	if err != nil {
		return nil, err
	}
	s.fsm = f
	s.initEvents()
	gauges{s}.register(cfg.Metrics)
	s.fatalCh = make(chan error, 1)
	f.SetFatalHandler(func(err error) {
		select {
		case s.fatalCh <- err:
		default:
		}
	})
	if err := s.setupRaft(); err != nil {
		// Nothing runs yet; release what setupRaft opened so a failed
		// start leaves neither the store locked nor the transport bound.
		s.closeRaftIO()
		return nil, err
	}
	go s.stopOnFatal()
	s.wg.Add(1)
	go s.monitorLeadership()
	s.startPKI()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.workers.Run(s.shutdownCtx)
	}()
	return s, nil
}

func (s *Server) setupRaft() error {
	rc := raft.DefaultConfig()
	rc.Logger = s.logger.Named("raft")
	rc.LocalID = raft.ServerID(s.cfg.NodeName)
	if rc.LocalID == "" {
		rc.LocalID = "server-1"
	}
	if s.cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = s.cfg.SnapshotThreshold
	}
	if s.cfg.TrailingLogs > 0 {
		rc.TrailingLogs = s.cfg.TrailingLogs
	}
	if s.cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = s.cfg.SnapshotInterval
	}
	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if s.cfg.DevMode {
		// A single in-memory voter elects itself after one heartbeat
		// timeout; keep it short so the dev agent is ready fast.
		rc.HeartbeatTimeout = 20 * time.Millisecond
		rc.ElectionTimeout = 20 * time.Millisecond
		rc.LeaderLeaseTimeout = 20 * time.Millisecond
		rc.CommitTimeout = 5 * time.Millisecond
		store := raft.NewInmemStore()
		logs, stable, snaps = store, store, raft.NewInmemSnapshotStore()
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(rc.LocalID))
		s.transport = tr
		return s.startRaft(rc, logs, stable, snaps, addr)
	}
	if err := raftstore.ApplyTiming(rc, s.cfg.RaftMultiplier, s.cfg.RaftTiming); err != nil {
		return err
	}
	dir := filepath.Join(s.cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("raft data dir: %w", err)
	}
	dbPath := filepath.Join(dir, "raft.db")
	bolt, err := raftstore.Open(dbPath)
	if err != nil {
		return err
	}
	s.raftStore = bolt
	fss, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, s.logger.Named("snapshot"))
	if err != nil {
		return fmt.Errorf("raft snapshot store: %w", err)
	}
	if s.cfg.RaftLayer != nil {
		tr := raft.NewNetworkTransportWithLogger(s.cfg.RaftLayer, 3, 10*time.Second, s.logger.Named("raft-net"))
		s.transport = tr
		return s.startRaft(rc, bolt, bolt, fss, raft.ServerAddress(s.cfg.RPCAddr))
	}
	addr := s.cfg.RPCAddr
	if addr == "" {
		addr = "127.0.0.1:4647"
	}
	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return fmt.Errorf("raft address %q: %w", addr, err)
	}
	tr, err := raft.NewTCPTransportWithLogger(addr, tcpAddr, 3, 10*time.Second, s.logger.Named("raft-net"))
	if err != nil {
		return fmt.Errorf("raft transport on %s: %w", addr, err)
	}
	s.transport = tr
	return s.startRaft(rc, bolt, bolt, fss, tr.LocalAddr())
}

func (s *Server) startRaft(rc *raft.Config, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, addr raft.ServerAddress) error {
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return err
	}
	clustered := !s.cfg.DevMode && (s.cfg.BootstrapExpect > 1 || len(s.cfg.RetryJoin) > 0)
	if !has && !clustered {
		conf := raft.Configuration{Servers: []raft.Server{{ID: rc.LocalID, Address: addr}}}
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, s.transport, conf); err != nil {
			return fmt.Errorf("raft bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(rc, s.fsm, logs, stable, snaps, s.transport)
	if err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	s.raft = r
	if clustered && !has {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			leaderLink{s}.joinLoop(s.shutdownCtx)
		}()
	}
	return nil
}

// State is the server's replicated state store.
func (s *Server) State() *state.StateStore { return s.fsm.State() }

// Region is the server's region.
func (s *Server) Region() string { return s.cfg.Region }

// Datacenter is the server's datacenter.
func (s *Server) Datacenter() string { return s.cfg.Datacenter }

// IsLeader reports whether this server leads.
func (s *Server) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderAddr is the current leader's address, or "".
func (s *Server) LeaderAddr() string {
	addr, _ := s.raft.LeaderWithID()
	if s.cfg.DevMode && addr != "" {
		if s.cfg.RPCAddr != "" {
			return s.cfg.RPCAddr
		}
		return "127.0.0.1:4647"
	}
	return string(addr)
}

// WaitForLeader blocks until some server leads or ctx ends. It returns the
// FSM's stop error as soon as the server met an entry it cannot apply:
// such a server never leads, and the error is the one to report.
func (s *Server) WaitForLeader(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if err := s.Failed(); err != nil {
			return err
		}
		if addr, _ := s.raft.LeaderWithID(); addr != "" && s.leaderReady() {
			return nil
		}
		select {
		case <-ctx.Done():
			return structs.NewError(structs.ErrNoLeader, "No cluster leader")
		case <-t.C:
		}
	}
}

func (s *Server) leaderReady() bool {
	if !s.IsLeader() {
		return true
	}
	return s.established.Load()
}

// Shutdown stops every loop and closes Raft.
//
// The loops are stopped while Raft still runs: a Raft apply that is in flight
// when Raft shuts down may never be answered (hashicorp/raft drops committed
// entries still queued for the FSM without responding to their futures), so
// a loop waiting on one would hang Shutdown for good.
// Leave stops a server on purpose: a leader first hands leadership to
// another server, so the cluster is not without a leader for an election
// timeout. Then it shuts down.
func (s *Server) Leave() error {
	if s.IsLeader() && !s.cfg.DevMode {
		if f := s.raft.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) > 1 {
			if err := s.raft.LeadershipTransfer().Error(); err != nil {
				s.logger.Warn("leadership transfer before shutdown failed", "error", err)
			} else {
				s.logger.Info("leadership transferred before shutdown")
			}
		}
	}
	return s.Shutdown()
}

// Shutdown stops every loop and closes Raft at once, as a crash would look
// to the other servers. Later calls return the first call's result.
func (s *Server) Shutdown() error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown() })
	return s.shutdownErr
}

// stopOnFatal shuts the server down when its FSM stops at an entry it
// cannot apply, then tells Config.OnFatal. It runs outside s.wg: Shutdown
// waits for s.wg.
func (s *Server) stopOnFatal() {
	select {
	case <-s.shutdownCtx.Done():
	case err := <-s.fatalCh:
		s.logger.Error("shutting down: the Raft log holds an entry this server cannot apply", "error", err)
		_ = s.Shutdown()
		if s.cfg.OnFatal != nil {
			s.cfg.OnFatal(err)
		}
	}
}

// Failed returns the error the server stopped with when its FSM met an
// entry it cannot apply, or nil.
func (s *Server) Failed() error { return s.fsm.Failed() }

func (s *Server) shutdown() error {
	s.shutdownCancel()
	s.events.Close()
	s.revokeLeadership()
	s.volumes.Stop()
	s.wg.Wait()
	// monitorLeadership may have established leadership again while the
	// first revoke ran; its loops saw the cancelled context and ended.
	s.revokeLeadership()
	// The controller calls given up on while running end with the queue
	// (disabled above, which delivers them a result).
	s.csi.Wait()
	err := s.raft.Shutdown().Error()
	// Pooled connections to peers stay open past Close; a peer's goroutine
	// reading one would wait for it for good.
	if c, ok := s.transport.(interface{ CloseStreams() }); ok {
		c.CloseStreams()
	}
	s.closeRaftIO()
	return err
}

// closeRaftIO closes the Raft transport and log store.
func (s *Server) closeRaftIO() {
	if c, ok := s.transport.(interface{ Close() error }); ok {
		_ = c.Close()
	}
	if s.raftStore != nil {
		_ = s.raftStore.Close()
	}
}

// raftApply commits one typed entry and returns its index. An error the FSM
// returned for the entry is returned as is, keeping its kind. A request that
// stores times (structs.Stamped) gets the leader's clock here, so that every
// server applying the entry, now or in a replay, stores the same times.
func (s *Server) raftApply(t structs.MessageType, msg any) (uint64, error) {
	idx, _, err := s.raftApplyResponse(t, msg)
	return idx, err
}

// raftApplyResponse is raftApply that also returns the entry's response
// when it is not an error (the FSM's answer, e.g. what a GC reap deleted).
func (s *Server) raftApplyResponse(t structs.MessageType, msg any) (uint64, any, error) {
	defer s.writes.begin()()
	return s.applyEntry(t, msg)
}

// gcApply is raftApplyResponse for the garbage collector's own entries:
// they are not writes that GC steps yield to.
func (s *Server) gcApply(t structs.MessageType, msg any) (uint64, any, error) {
	return s.applyEntry(t, msg)
}

func (s *Server) applyEntry(t structs.MessageType, msg any) (uint64, any, error) {
	wait, err := s.proposeEntry(t, msg)
	if err != nil {
		return 0, nil, err
	}
	return wait()
}

// proposeEntry hands one entry to Raft and returns at once, with what
// waits for it to commit and apply (applyEntry's answer): entries proposed
// one after another from one goroutine are in the log in that order, and
// the caller may prepare the next while this one applies (the garbage
// collector's pipelined reap entries).
func (s *Server) proposeEntry(t structs.MessageType, msg any) (wait func() (uint64, any, error), err error) {
	if !s.IsLeader() {
		return nil, structs.NewError(structs.ErrNoLeader, "No cluster leader")
	}
	if st, ok := msg.(structs.Stamped); ok {
		st.StampNow(s.cfg.Now().UnixNano())
	}
	buf, err := fsm.Encode(t, msg)
	if err != nil {
		return nil, fmt.Errorf("encode raft entry: %w", err)
	}
	// What reaches the log must decode on every server forever: an entry
	// the FSM's own decoder refuses is refused here, not committed.
	if err := fsm.CheckEntry(buf); err != nil {
		return nil, structs.NewError(structs.ErrInvalid, "refusing to commit a Raft entry the FSM could not apply: %v", err)
	}
	start := time.Now()
	f := s.raft.Apply(buf, 30*time.Second)
	return func() (uint64, any, error) {
		err := f.Error()
		s.cfg.Metrics.RaftApplied(time.Since(start))
		if err != nil {
			if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
				return 0, nil, structs.NewError(structs.ErrNoLeader, "No cluster leader: %v", err)
			}
			return 0, nil, err
		}
		resp := f.Response()
		if rerr, ok := resp.(error); ok && rerr != nil {
			return f.Index(), nil, rerr
		}
		return f.Index(), resp, nil
	}, nil
}

// snapshotMinIndex returns a state snapshot whose index is at least index,
// waiting for the FSM to catch up. On the leader raftApply returns after the
// FSM applied the entry, so the wait is rare and short; a ticker suffices.
func (s *Server) snapshotMinIndex(ctx context.Context, index uint64) (*state.StateSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var t *time.Ticker
	for {
		st := s.State()
		if st.LatestIndex() >= index {
			return st.Snapshot()
		}
		if t == nil {
			t = time.NewTicker(2 * time.Millisecond)
			defer t.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("timed out waiting for state index %d: %w", index, ctx.Err())
		case <-t.C:
		}
	}
}

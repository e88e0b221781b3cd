// Package nodesim simulates many client nodes in one process, to measure
// the servers at scale. Each simulated node is a client without tasks: it
// has a node identity of its own (ID and secret), joins the cluster PKI
// with the client join token and gets its own certificate, then speaks to
// the servers over its own mutual-TLS RPC connection with the same methods
// the real client (core/client through the agent's remoteServers) uses:
// Node.Register, Node.Heartbeat at the TTL the server hands back,
// Node.GetAllocs as a blocking query, and Node.UpdateAllocs in batches.
// Nothing goes around the RPC layer into the state store.
//
// Connections are not multiplexed: the servers authorize every node call
// by the caller's certificate (pki.Identity.RequireNode), and a TLS
// connection presents one certificate, so N nodes hold N connections, as
// N real clients would. Each node also dials from a loopback address of
// its own when the servers are on loopback (Config.LoopbackSources), as N
// real clients come from N hosts: the servers' per-host limits (the
// public join rate, the pending connections) would otherwise see one host
// opening thousands of connections.
package nodesim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/server/pkiendpoint"
	"github.com/drover-org/drover/core/structs"
)

// Config configures a simulation. Zero values take the documented
// defaults.
type Config struct {
	// Servers are the servers' RPC addresses ("host:port"). Node i starts
	// with server i mod len(Servers), as a fleet whose clients list the
	// servers in different orders, and moves to the next one when its
	// server is unreachable or has no leader, as the real client (the
	// agent's remoteServers) does with its client.servers list.
	Servers []string
	// JoinToken is the client join token (drover operator join-token
	// client).
	JoinToken string
	// Nodes is how many nodes to simulate.
	Nodes int
	// Datacenter defaults to "dc1", NodePool to "default", NamePrefix to
	// "sim" (node i is named <prefix>-<i>).
	Datacenter, NodePool, NamePrefix string
	// RunDelay is how long after a node sees a new allocation it reports
	// it running; CompleteDelay is how long after that an allocation of a
	// job type in CompleteTypes reports complete (its simulated tasks
	// exit 0). Allocations of other job types keep running. The types are
	// the caller's to name: what a job type does is its plugin's business.
	RunDelay, CompleteDelay time.Duration
	CompleteTypes           []string
	// BatchInterval coalesces non-terminal alloc updates before they are
	// sent (default 200ms, the client's); a terminal update is sent at
	// once, with whatever else is pending.
	BatchInterval time.Duration
	// AllocWatchWait is the blocking query's MaxWait (default 5 minutes,
	// the client's).
	AllocWatchWait time.Duration
	// StartConcurrency bounds the nodes joining and registering at once
	// (default 64): the servers' public join server allows 128
	// connections in all.
	StartConcurrency int
	// RetryInterval and MaxRetryInterval are the capped exponential
	// backoff of failed calls (defaults 1s and 30s, the client's).
	RetryInterval, MaxRetryInterval time.Duration
	// LoopbackSources gives node i the source address 127.x.y.z (i+2 in
	// the low three bytes); only for servers on loopback.
	LoopbackSources bool
	Logger          hclog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if len(c.Servers) == 0 {
		return c, errors.New("nodesim: Servers: at least one server address is required")
	}
	if c.Nodes <= 0 {
		return c, fmt.Errorf("nodesim: Nodes: %d must be at least 1", c.Nodes)
	}
	if c.Nodes > 1<<24-2 {
		return c, fmt.Errorf("nodesim: Nodes: %d is more than the loopback network holds", c.Nodes)
	}
	tok, err := pki.ParseJoinToken(c.JoinToken)
	if err != nil {
		return c, fmt.Errorf("nodesim: JoinToken: %w", err)
	}
	if tok.Role() != pki.RoleClient {
		return c, fmt.Errorf("nodesim: JoinToken: a %s join token, a client one is needed", tok.Role())
	}
	if c.Datacenter == "" {
		c.Datacenter = "dc1"
	}
	if c.NodePool == "" {
		c.NodePool = structs.NodePoolDefault
	}
	if c.NamePrefix == "" {
		c.NamePrefix = "sim"
	}
	if c.BatchInterval <= 0 {
		c.BatchInterval = 200 * time.Millisecond
	}
	if c.AllocWatchWait <= 0 {
		c.AllocWatchWait = 5 * time.Minute
	}
	if c.StartConcurrency <= 0 {
		c.StartConcurrency = 64
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.MaxRetryInterval <= 0 {
		c.MaxRetryInterval = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c, nil
}

// Stats are counters over all nodes since the simulation started.
type Stats struct {
	// Joined nodes hold a certificate; Registered ones were accepted by
	// Node.Register and have heartbeated once (they are ready).
	Joined, Registered int64
	// Heartbeats that succeeded and failed; Reregistered counts nodes
	// the servers no longer knew (ErrNotFound), registered again.
	Heartbeats, HeartbeatErrors, Reregistered int64
	// AllocsSeen are allocations the watches delivered for the first
	// time; Running and Complete the updates the servers accepted.
	AllocsSeen, Running, Complete int64
	// UpdateErrors are failed Node.UpdateAllocs calls (retried);
	// WatchErrors failed blocking queries (retried).
	UpdateErrors, WatchErrors int64
	// WatchAnswers are the blocking queries' answers, WatchNews those
	// that held an allocation the node had not seen: the rest woke the
	// node for nothing it acts on.
	WatchAnswers, WatchNews int64
	// Rotations count the times a node left its server for the next
	// one (unreachable, or no leader), closing its connection.
	Rotations int64
}

// Sim is a running simulation. Start it with Start; Stop ends it.
type Sim struct {
	cfg   Config
	token *pki.JoinToken
	nodes []*node

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	joined, registered, heartbeats, heartbeatErrs, reregistered atomic.Int64
	seen, running, complete, updateErrs, watchErrs              atomic.Int64
	rotations, watchAnswers, watchNews                          atomic.Int64
	// logged is the second of the last logged failure (high bits) and
	// how many were logged in it (low 8 bits).
	logged atomic.Int64
}

// maxLoggedPerSecond bounds the failed calls logged at warn level:
// 10,000 nodes failing at once during a failover must not flood the log;
// the counters count them all.
const maxLoggedPerSecond = 5

// logFailure logs a failed call, at most maxLoggedPerSecond of them in
// each second.
func (s *Sim) logFailure(n *node, method string, err error) {
	sec := time.Now().Unix()
	for {
		cur := s.logged.Load()
		if cur>>8 != sec {
			if !s.logged.CompareAndSwap(cur, sec<<8|1) {
				continue
			}
		} else if cur&0xff >= maxLoggedPerSecond || !s.logged.CompareAndSwap(cur, cur+1) {
			if cur&0xff >= maxLoggedPerSecond {
				return
			}
			continue
		}
		break
	}
	s.cfg.Logger.Warn("call failed", "node", n.name, "method", method, "error", err)
}

// Start joins and registers every node (at most StartConcurrency at once)
// and returns once all are ready, heartbeating and watching their
// allocations, or with the first error that retrying cannot cure (a
// refused join token). ctx bounds the start only.
func Start(ctx context.Context, cfg Config) (*Sim, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	tok, _ := pki.ParseJoinToken(cfg.JoinToken) // checked in withDefaults
	runCtx, cancel := context.WithCancel(context.Background())
	s := &Sim{cfg: cfg, token: tok, ctx: runCtx, cancel: cancel, nodes: make([]*node, cfg.Nodes)}
	for i := range s.nodes {
		s.nodes[i] = s.newNode(i)
	}
	sem := make(chan struct{}, cfg.StartConcurrency)
	errc := make(chan error, 1)
	startCtx, stopStart := context.WithCancel(ctx)
	defer stopStart()
	var starting sync.WaitGroup
	for _, n := range s.nodes {
		select {
		case sem <- struct{}{}:
		case <-startCtx.Done():
		}
		if startCtx.Err() != nil {
			break
		}
		starting.Add(1)
		go func() {
			defer starting.Done()
			defer func() { <-sem }()
			if err := n.start(startCtx); err != nil {
				select {
				case errc <- fmt.Errorf("node %s: %w", n.name, err):
				default:
				}
				stopStart()
			}
		}()
	}
	starting.Wait()
	select {
	case err := <-errc:
		s.Stop()
		return nil, err
	default:
	}
	if err := startCtx.Err(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("nodesim: start: %w", err)
	}
	return s, nil
}

// Stop ends every node's loops, closes their connections and waits for
// them. Nodes are not deregistered: the servers see them stop
// heartbeating, as after a crash.
func (s *Sim) Stop() {
	s.cancel()
	s.wg.Wait()
	for _, n := range s.nodes {
		n.closeConns()
	}
}

// NodeIDs returns the simulated nodes' IDs, in node order.
func (s *Sim) NodeIDs() []string {
	out := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.id
	}
	return out
}

// Stats returns the counters.
func (s *Sim) Stats() Stats {
	return Stats{
		Joined: s.joined.Load(), Registered: s.registered.Load(),
		Heartbeats: s.heartbeats.Load(), HeartbeatErrors: s.heartbeatErrs.Load(), Reregistered: s.reregistered.Load(),
		AllocsSeen: s.seen.Load(), Running: s.running.Load(), Complete: s.complete.Load(),
		UpdateErrors: s.updateErrs.Load(), WatchErrors: s.watchErrs.Load(), Rotations: s.rotations.Load(),
		WatchAnswers: s.watchAnswers.Load(), WatchNews: s.watchNews.Load(),
	}
}

// HeartbeatedSince counts the nodes whose last successful heartbeat began
// after t: after a leader failover at t, the nodes the new leader has
// heard from.
func (s *Sim) HeartbeatedSince(t time.Time) int {
	k := 0
	for _, n := range s.nodes {
		if n.lastBeat.Load() > t.UnixNano() {
			k++
		}
	}
	return k
}

// HeartbeatsFailing counts the nodes whose last heartbeat failed (they
// are retrying): after a leader failover, the nodes whose heartbeat fell
// due and has not reached the new leader yet.
func (s *Sim) HeartbeatsFailing() int {
	k := 0
	for _, n := range s.nodes {
		if n.beatFailing.Load() {
			k++
		}
	}
	return k
}

func (s *Sim) goFunc(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// backoff is the client's retry delay: capped exponential with up to 25%
// jitter, so that nodes recovering from an outage do not retry in step.
func (s *Sim) backoff(fails int) time.Duration {
	d := s.cfg.RetryInterval
	for i := 1; i < fails && d < s.cfg.MaxRetryInterval; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxRetryInterval)
	return d + time.Duration(rand.Float64()*0.25*float64(d))
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryable: another server, or a later try, may succeed.
func retryable(err error) bool {
	return errors.Is(err, structs.ErrUnavailable) || errors.Is(err, structs.ErrNoLeader)
}

// node is one simulated client.
type node struct {
	sim      *Sim
	idx      int
	id       string
	secret   string
	name     string
	sourceIP net.IP

	tlsCfg *tls.Config

	connMu sync.Mutex
	conns  map[string]*rpc.Conn
	cur    int // index into sim.cfg.Servers of the server in use
	// noLeaderSince is when the server in use first answered "no
	// leader" in a row (zero: it did not); see rpc.NoLeaderPatience.
	noLeaderSince time.Time

	// lastBeat is when the last successful heartbeat began (unix ns);
	// beatFailing is set while the node's last heartbeat failed.
	lastBeat    atomic.Int64
	beatFailing atomic.Bool

	// The update batcher's state (see report and runBatcher).
	updMu   sync.Mutex
	pending map[string]*structs.Allocation
	urgent  bool
	kick    chan struct{}
	// known are the allocations this node has seen, by ID.
	known map[string]bool
}

func (s *Sim) newNode(i int) *node {
	n := &node{
		sim: s, idx: i, id: uuid.NewString(), secret: uuid.NewString(),
		name: fmt.Sprintf("%s-%05d", s.cfg.NamePrefix, i), cur: i % len(s.cfg.Servers),
		conns: map[string]*rpc.Conn{}, pending: map[string]*structs.Allocation{},
		kick: make(chan struct{}, 1), known: map[string]bool{},
	}
	if s.cfg.LoopbackSources {
		v := i + 2 // 127.0.0.1 is every other process's source
		n.sourceIP = net.IPv4(127, byte(v>>16), byte(v>>8), byte(v))
	}
	return n
}

func (n *node) dial(addr string, tlsCfg *tls.Config) (*rpc.Conn, error) {
	if n.sourceIP != nil {
		return rpc.DialFrom(addr, n.sourceIP, tlsCfg)
	}
	return rpc.Dial(addr, tlsCfg)
}

// structsNode is what the node registers: a Linux host whose raw_exec
// driver is detected and healthy, with room for many small tasks.
func (n *node) structsNode() *structs.Node {
	return &structs.Node{
		ID: n.id, SecretID: n.secret, Name: n.name, Datacenter: n.sim.cfg.Datacenter,
		NodePool: n.sim.cfg.NodePool, Status: structs.NodeStatusInit,
		SchedulingEligibility: structs.NodeSchedulingEligible,
		Attributes: map[string]string{
			"kernel.name": "linux", "cpu.arch": "amd64", "os.name": "debian", "unique.hostname": n.name,
			"cpu.numcores": "8", "memory.totalbytes": "34359738368", "driver.raw_exec": "1",
			"nomad.version": "0.1.0", "drover.version": "0.1.0",
		},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 32000, TotalCpuCores: 8}, Memory: structs.NodeMemoryResources{MemoryMB: 32768},
			Disk: structs.NodeDiskResources{DiskMB: 1 << 20},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true, HealthDescription: "Healthy", UpdateTime: time.Now()}},
		Meta:    map[string]string{"simulated": "true"},
	}
}

// start joins, registers and heartbeats once, then starts the node's
// loops.
func (n *node) start(ctx context.Context) error {
	if err := n.join(ctx); err != nil {
		return err
	}
	n.sim.joined.Add(1)
	ttl, err := n.register(ctx)
	if err != nil {
		return err
	}
	// The first heartbeat moves the node to ready, as the client's does.
	for fails := 0; ; {
		began := time.Now()
		ttl2, err := n.heartbeat(ctx)
		if err == nil {
			n.lastBeat.Store(began.UnixNano())
			ttl = ttl2
			break
		}
		if !retryable(err) {
			return err
		}
		fails++
		if !sleepCtx(ctx, n.sim.backoff(fails)) {
			return ctx.Err()
		}
	}
	n.sim.registered.Add(1)
	s := n.sim
	s.goFunc(func() { n.heartbeatLoop(ttl) })
	s.goFunc(n.watchLoop)
	s.goFunc(n.runBatcher)
	return nil
}

// join obtains the node's certificate with the client join token, trying
// the servers in turn while they answer "retry later" (rate limit, no
// leader, unreachable).
func (n *node) join(ctx context.Context) error {
	s := n.sim
	for fails := 0; ; {
		addr := s.cfg.Servers[(n.idx+fails)%len(s.cfg.Servers)]
		cert, trust, err := n.joinOnce(ctx, addr)
		if err == nil {
			store, err := pki.NewCertStore(cert)
			if err != nil {
				return err
			}
			n.tlsCfg = pki.ClientTLSConfig(store, trust, pki.RoleServer)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, structs.ErrPermissionDenied) || errors.Is(err, structs.ErrInvalid) {
			return fmt.Errorf("join through %s: %w", addr, err)
		}
		fails++
		s.cfg.Logger.Debug("join failed; retrying", "node", n.name, "server", addr, "error", err)
		if !sleepCtx(ctx, min(s.backoff(fails), 5*time.Second)) {
			return ctx.Err()
		}
	}
}

func (n *node) joinOnce(ctx context.Context, addr string) (*tls.Certificate, *pki.Trust, error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, nil, err
	}
	// One connection for both steps: the challenge lives on the server
	// that issued it.
	conn, err := n.dial(addr, pki.PinnedTLSConfig(n.sim.token))
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch, err := rpc.Call[server.Empty, pkiendpoint.JoinChallengeReply](ctx, conn, "PKI.JoinChallenge", &server.Empty{})
	if err != nil {
		return nil, nil, err
	}
	req, err := pki.BuildJoinRequest(n.sim.token, ch.Challenge, key, pki.JoinParams{ID: n.id})
	if err != nil {
		return nil, nil, err
	}
	resp, err := rpc.Call[pki.JoinRequest, pki.JoinResponse](ctx, conn, "PKI.Join", req)
	if err != nil {
		return nil, nil, err
	}
	return pki.CompleteJoin(n.sim.token, key, resp)
}

func (n *node) closeConns() {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	for addr, c := range n.conns {
		_ = c.Close()
		delete(n.conns, addr)
	}
}

func (n *node) current() (string, int) {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	return n.sim.cfg.Servers[n.cur%len(n.sim.cfg.Servers)], n.cur
}

// retireGrace is how long a simulated node keeps its connection to a
// server it moved away from.
const retireGrace = 30 * time.Second

// rotate moves past the server at position seen (unless another call
// already did). A real client keeps a pooled connection to every server
// it has used; a simulated node closes the one it left once it has not
// come back to that server for retireGrace, so that N nodes hold about N
// connections in this process once they settle (not 3N, past a process's
// file limit at 10,000 nodes), while a node that goes round the servers
// during an election reuses its connections instead of handshaking again,
// as a real client would.
func (n *node) rotate(seen int) {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.cur != seen {
		return
	}
	addr := n.sim.cfg.Servers[n.cur%len(n.sim.cfg.Servers)]
	if c, ok := n.conns[addr]; ok {
		time.AfterFunc(retireGrace, func() { n.retire(addr, c) })
	}
	n.sim.rotations.Add(1)
	n.cur++
	n.noLeaderSince = time.Time{}
}

// retire closes c, the node's connection to addr, unless addr is the
// node's server again.
func (n *node) retire(addr string, c *rpc.Conn) {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.sim.cfg.Servers[n.cur%len(n.sim.cfg.Servers)] == addr || n.conns[addr] != c {
		return
	}
	_ = c.Close()
	delete(n.conns, addr)
}

func (n *node) conn(addr string) (*rpc.Conn, error) {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if c, ok := n.conns[addr]; ok {
		return c, nil
	}
	c, err := n.dial(addr, n.tlsCfg)
	if err != nil {
		return nil, err
	}
	n.conns[addr] = c
	return c, nil
}

// call is the agent's remoteServers call: the current server first, and
// the next one when it is unreachable or has no leader.
func call[Req, Resp any](ctx context.Context, n *node, method string, req *Req) (*Resp, error) {
	servers := n.sim.cfg.Servers
	var lastErr error
	for i := 0; i < len(servers); i++ {
		addr, pos := n.current()
		conn, err := n.conn(addr)
		if err == nil {
			var resp *Resp
			resp, err = rpc.Call[Req, Resp](ctx, conn, method, req)
			if err != nil && ctx.Err() == nil {
				n.sim.logFailure(n, method, err)
			}
			if err == nil || !retryable(err) {
				n.leaderSeen(pos)
				return resp, err
			}
			if errors.Is(err, structs.ErrNoLeader) && n.waitForLeader(pos) {
				// An election: the caller retries here after its backoff.
				return nil, fmt.Errorf("server %s: %w", addr, err)
			}
		}
		lastErr = fmt.Errorf("server %s: %w", addr, err)
		n.rotate(pos)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, lastErr
}

// waitForLeader reports whether the node stays with the server at pos,
// which just answered "no leader": yes until it has answered so for
// rpc.NoLeaderPatience, as the real client (the agent's remoteServers).
func (n *node) waitForLeader(pos int) bool {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.cur != pos {
		return false
	}
	if n.noLeaderSince.IsZero() {
		n.noLeaderSince = time.Now()
	}
	if time.Since(n.noLeaderSince) < rpc.NoLeaderPatience {
		return true
	}
	n.noLeaderSince = time.Time{}
	return false
}

// leaderSeen clears the "no leader" streak of the server at pos.
func (n *node) leaderSeen(pos int) {
	n.connMu.Lock()
	if n.cur == pos {
		n.noLeaderSince = time.Time{}
	}
	n.connMu.Unlock()
}

func (n *node) register(ctx context.Context) (time.Duration, error) {
	for fails := 0; ; {
		resp, err := call[server.NodeRegisterArgs, server.TTLReply](ctx, n, "Node.Register", &server.NodeRegisterArgs{Node: n.structsNode()})
		if err == nil {
			return resp.TTL, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return 0, fmt.Errorf("register: %w", err)
		}
		fails++
		if !sleepCtx(ctx, n.sim.backoff(fails)) {
			return 0, ctx.Err()
		}
	}
}

func (n *node) heartbeat(ctx context.Context) (time.Duration, error) {
	resp, err := call[server.NodeAuthArgs, server.TTLReply](ctx, n, "Node.Heartbeat", &server.NodeAuthArgs{NodeID: n.id, SecretID: n.secret})
	if err != nil {
		return 0, err
	}
	return resp.TTL, nil
}

// heartbeatLoop heartbeats at the client's pace: about half the TTL,
// jittered forward by up to a tenth of it; after a failure, the backoff
// capped at half the TTL, so that one lost heartbeat does not mark the
// node down.
func (n *node) heartbeatLoop(ttl time.Duration) {
	s := n.sim
	ctx := s.ctx
	interval := func(ttl time.Duration) time.Duration {
		if ttl <= 0 {
			ttl = 10 * time.Second
		}
		return ttl/2 + time.Duration(rand.Float64()*float64(ttl)/10)
	}
	next, fails := interval(ttl), 0
	for {
		if !sleepCtx(ctx, next) {
			return
		}
		began := time.Now()
		newTTL, err := n.heartbeat(ctx)
		switch {
		case err == nil:
			n.lastBeat.Store(began.UnixNano())
			n.beatFailing.Store(false)
			s.heartbeats.Add(1)
			fails, ttl = 0, newTTL
			next = interval(ttl)
		case ctx.Err() != nil:
			return
		case errors.Is(err, structs.ErrNotFound):
			s.reregistered.Add(1)
			s.cfg.Logger.Warn("server does not know this node; registering again", "node", n.name)
			if ttl, err = n.register(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				s.cfg.Logger.Error("register again failed", "node", n.name, "error", err)
			}
			fails, next = 0, 0
		default:
			n.beatFailing.Store(true)
			s.heartbeatErrs.Add(1)
			fails++
			next = min(s.backoff(fails), max(ttl/2, time.Second))
			s.cfg.Logger.Debug("heartbeat failed; retrying", "node", n.name, "error", err, "retry_in", next)
		}
	}
}

// watchLoop follows the node's allocations with blocking queries, as the
// client's watchAllocs does, and schedules each new one's updates.
func (n *node) watchLoop() {
	s := n.sim
	ctx := s.ctx
	var index uint64
	fails := 0
	for {
		began := time.Now()
		resp, err := call[server.NodeAllocsArgs, server.NodeAllocsReply](ctx, n, "Node.GetAllocs", &server.NodeAllocsArgs{
			NodeID: n.id, SecretID: n.secret, MinIndex: index, MaxWait: s.cfg.AllocWatchWait,
		})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.watchErrs.Add(1)
			fails++
			if !sleepCtx(ctx, s.backoff(fails)) {
				return
			}
			continue
		}
		fails = 0
		s.watchAnswers.Add(1)
		unchanged := resp.Index == index && index != 0
		index = resp.Index
		if unchanged {
			// A server that answers without blocking must not make
			// the watch spin (the client's minWatchPace).
			if d := 50*time.Millisecond - time.Since(began); d > 0 && !sleepCtx(ctx, d) {
				return
			}
			continue
		}
		news := false
		for _, a := range resp.Allocs {
			if a == nil || a.ID == "" || n.known[a.ID] || a.TerminalStatus() {
				continue
			}
			n.known[a.ID] = true
			news = true
			s.seen.Add(1)
			n.scheduleUpdates(a)
		}
		if news {
			s.watchNews.Add(1)
		}
	}
}

// scheduleUpdates reports a running after RunDelay, then, for a job that
// runs to completion, complete after CompleteDelay.
func (n *node) scheduleUpdates(a *structs.Allocation) {
	s := n.sim
	toComplete := a.Job != nil && slices.Contains(s.cfg.CompleteTypes, a.Job.Type)
	tasks := taskNames(a)
	s.goFunc(func() {
		if !sleepCtx(s.ctx, s.cfg.RunDelay) {
			return
		}
		started := time.Now()
		n.report(update(a.ID, tasks, structs.AllocClientStatusRunning, started, time.Time{}))
		if !toComplete {
			return
		}
		if !sleepCtx(s.ctx, s.cfg.CompleteDelay) {
			return
		}
		n.report(update(a.ID, tasks, structs.AllocClientStatusComplete, started, time.Now()))
	})
}

func taskNames(a *structs.Allocation) []string {
	if a.Job == nil {
		return nil
	}
	for _, tg := range a.Job.TaskGroups {
		if tg.Name == a.TaskGroup {
			names := make([]string, 0, len(tg.Tasks))
			for _, t := range tg.Tasks {
				names = append(names, t.Name)
			}
			return names
		}
	}
	return nil
}

// update is the client-side state of an allocation as the client reports
// it: its status and each task's state.
func update(id string, tasks []string, status string, started, finished time.Time) *structs.Allocation {
	st := map[string]*structs.TaskState{}
	for _, t := range tasks {
		ts := &structs.TaskState{State: structs.TaskStateRunning, StartedAt: started}
		if status == structs.AllocClientStatusComplete {
			ts.State, ts.FinishedAt = structs.TaskStateDead, finished
		}
		st[t] = ts
	}
	desc := "Tasks are running"
	if status == structs.AllocClientStatusComplete {
		desc = "All tasks have completed"
	}
	return &structs.Allocation{ID: id, ClientStatus: status, ClientDescription: desc, TaskStates: st}
}

// report queues an update for the batcher; a terminal one makes it send
// at once.
func (n *node) report(a *structs.Allocation) {
	n.updMu.Lock()
	n.pending[a.ID] = a
	if a.ClientStatus == structs.AllocClientStatusComplete {
		n.urgent = true
	}
	n.updMu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// runBatcher is the client's update batcher: updates of one alloc
// supersede each other, non-terminal ones wait out BatchInterval, a
// terminal one flushes everything pending, and a failed send is retried
// with backoff unless newer updates replaced it.
func (n *node) runBatcher() {
	s := n.sim
	ctx := s.ctx
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		if !n.isUrgent() {
			t := time.NewTimer(s.cfg.BatchInterval)
		wait:
			for {
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
					break wait
				case <-n.kick:
					if n.isUrgent() {
						t.Stop()
						break wait
					}
				}
			}
		}
		if err := n.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			s.updateErrs.Add(1)
			fails++
			if !sleepCtx(ctx, s.backoff(fails)) {
				return
			}
			select {
			case n.kick <- struct{}{}:
			default:
			}
			continue
		}
		fails = 0
	}
}

func (n *node) isUrgent() bool {
	n.updMu.Lock()
	defer n.updMu.Unlock()
	return n.urgent
}

func (n *node) flush(ctx context.Context) error {
	n.updMu.Lock()
	if len(n.pending) == 0 {
		n.urgent = false
		n.updMu.Unlock()
		return nil
	}
	batch := make([]*structs.Allocation, 0, len(n.pending))
	for _, a := range n.pending {
		batch = append(batch, a)
	}
	urgent := n.urgent
	n.pending = map[string]*structs.Allocation{}
	n.urgent = false
	n.updMu.Unlock()

	_, err := call[server.NodeUpdateAllocsArgs, server.Empty](ctx, n, "Node.UpdateAllocs", &server.NodeUpdateAllocsArgs{
		NodeID: n.id, SecretID: n.secret, Allocs: batch,
	})
	if err == nil {
		s := n.sim
		for _, a := range batch {
			if a.ClientStatus == structs.AllocClientStatusComplete {
				s.complete.Add(1)
			} else {
				s.running.Add(1)
			}
		}
		return nil
	}
	n.updMu.Lock()
	for _, a := range batch {
		if _, newer := n.pending[a.ID]; !newer {
			n.pending[a.ID] = a
		}
	}
	n.urgent = n.urgent || urgent
	n.updMu.Unlock()
	return err
}

// Package client is drover's node agent: it fingerprints the machine,
// registers the node with the servers and keeps it alive with heartbeats,
// watches the node's allocations, runs their tasks through driver plugins
// (alloc runner → task runners, with restart policies and lifecycle
// hooks), reports their state back in batches, serves their logs, and
// persists enough to resume its tasks after a client restart.
package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/client/csi"
	"github.com/drover-org/drover/core/client/services"
	"github.com/drover-org/drover/core/structs"
)

// Client is a running node agent. Create it with New, then Start it; it
// runs until Shutdown.
type Client struct {
	cfg    Config
	logger hclog.Logger
	state  *stateStore

	nodeID, secretID string

	batcher  *updateBatcher
	services *services.Registrar
	rcfg     *runnerConfig

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	nodeMu sync.RWMutex
	node   *structs.Node

	mu       sync.Mutex
	runners  map[string]*allocRunner
	started  bool
	shutdown bool
	// destroying: Destroy runs; no alloc is started or changed any more.
	destroying bool

	registeredOnce sync.Once
	registered     chan struct{}
	// nodeChanged is signalled when the node changes between fingerprints
	// (a CSI plugin became healthy): the node is registered again.
	nodeChanged chan struct{}
	// api is the client-side API's state (stats samples, dynamic meta).
	api apiState
}

// New prepares a client: it validates cfg, creates the state and alloc
// dirs, loads or creates the node identity and fingerprints the host. It
// starts nothing; see Start.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Meta = withDefaultMeta(cfg.Meta)
	state, err := openStateStore(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.AllocDir, 0o755); err != nil {
		return nil, fmt.Errorf("create alloc dir root: %w", err)
	}
	nodeID, secretID, err := state.identity(cfg.NodeID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		cfg:         cfg,
		logger:      cfg.Logger.Named("client"),
		state:       state,
		nodeID:      nodeID,
		secretID:    secretID,
		ctx:         ctx,
		cancel:      cancel,
		runners:     make(map[string]*allocRunner),
		registered:  make(chan struct{}),
		nodeChanged: make(chan struct{}, 1),
	}
	c.batcher = newUpdateBatcher(c.sendUpdates, cfg.UpdateBatchInterval, c.logger.Named("updates"))
	c.services = services.NewRegistrar(cfg.Server.UpdateServices, nodeID, secretID,
		backoff{Base: cfg.RetryInterval, Max: cfg.MaxRetryInterval}.next, c.logger.Named("services"))
	c.rcfg = &runnerConfig{
		Services: c.services,
		LookupServices: func(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
			a := *args
			a.NodeID, a.SecretID = nodeID, secretID
			return cfg.Server.LookupServices(ctx, &a)
		},
		LookupVariables: variableLookup(cfg.Server, nodeID, secretID),
		Logger:          c.logger.Named("alloc_runner"),
		Metrics:         cfg.Metrics,
		Drivers:         cfg.Drivers,
		Node:            c.Node,
		Region:          cfg.Region,
		Path:            os.Getenv("PATH"),
		AllocRoot:       cfg.AllocDir,
		Update:          c.batcher.Enqueue,
		MaxKillTimeout:  cfg.MaxKillTimeout,
		Persist: func(p *persistedAlloc) {
			if err := c.state.putAlloc(p); err != nil {
				c.logger.Error("failed to persist alloc state", "alloc_id", p.Alloc.ID, "error", err)
			}
		},
	}
	if cfg.CSIBridge != nil {
		c.rcfg.CSI = csi.NewPlugins(cfg.CSIBridge, filepath.Join(cfg.StateDir, "csi"), cfg.CSIProbeInterval, cfg.CSIHealthInterval,
			c.logger.Named("csi"), c.csiChanged)
		c.rcfg.Volumes = csi.NewManager(ctx, csi.Config{
			Plugins: c.rcfg.CSI, Bridge: cfg.CSIBridge, Server: cfg.Server, NodeID: nodeID, SecretID: secretID,
			StateDir: cfg.StateDir, PluginWait: cfg.CSIPluginWait, RetryBase: cfg.CSIRetryInterval, RetryMax: cfg.CSIMaxRetryInterval,
			Logger: c.logger.Named("csi_volumes"), Go: c.goFunc,
		})
	}
	if c.rcfg.Networks, c.rcfg.NetworksErr = newNetworks(cfg); c.rcfg.NetworksErr != nil {
		c.logger.Info("allocations cannot have their own network namespace here (network modes bridge, none, cni/*)", "reason", c.rcfg.NetworksErr)
	}
	c.node = c.baseNode()
	c.loadDynamicMeta()
	return c, nil
}

// NodeID is the node's ID, stable across restarts.
func (c *Client) NodeID() string { return c.nodeID }

// Node returns a copy of the node as last fingerprinted.
func (c *Client) Node() *structs.Node {
	c.nodeMu.RLock()
	defer c.nodeMu.RUnlock()
	return c.node.Copy()
}

// Registered is closed once the node has registered with a server and sent
// its first heartbeat.
func (c *Client) Registered() <-chan struct{} { return c.registered }

// baseNode builds the node from the config and the host fingerprint.
func (c *Client) baseNode() *structs.Node {
	facts := fingerprintHost(c.cfg.ProcRoot, c.cfg.AllocDir, c.cfg.Version)
	c.fingerprintNetwork(facts)
	n := &structs.Node{
		ID: c.nodeID, SecretID: c.secretID, Datacenter: c.cfg.Datacenter, Name: c.cfg.Name,
		HTTPAddr: c.cfg.HTTPAddr, Attributes: facts.Attributes, NodeResources: facts.Resources,
		ReservedResources: c.cfg.ReservedResources, Meta: maps.Clone(c.cfg.Meta),
		NodeClass: c.cfg.NodeClass, NodePool: c.cfg.NodePool,
		SchedulingEligibility: structs.NodeSchedulingEligible, Status: structs.NodeStatusInit,
		Drivers: map[string]*structs.DriverInfo{}, HostVolumes: c.hostVolumesOfNode(),
	}
	if n.Meta == nil {
		n.Meta = map[string]string{}
	}
	n.ComputedClass = computedClass(n)
	return n
}

// fingerprintDrivers refreshes the node's driver facts and reports whether
// anything the scheduler looks at changed.
func (c *Client) fingerprintDrivers(ctx context.Context) bool {
	infos, attrs := fingerprintDrivers(ctx, c.cfg.Drivers, driverFilter(c.cfg.Options))
	c.nodeMu.Lock()
	defer c.nodeMu.Unlock()
	n := c.node.Copy()
	for k := range n.Attributes {
		if _, isDriverAttr := attrs[k]; !isDriverAttr && strings.HasPrefix(k, "driver.") {
			delete(n.Attributes, k)
		}
	}
	maps.Copy(n.Attributes, attrs)
	changed := !reflect.DeepEqual(n.Attributes, c.node.Attributes) || driversChanged(c.node.Drivers, infos)
	n.Drivers = infos
	n.ComputedClass = computedClass(n)
	c.node = n
	return changed
}

func driversChanged(old, cur map[string]*structs.DriverInfo) bool {
	if len(old) != len(cur) {
		return true
	}
	for k, o := range old {
		n, ok := cur[k]
		if !ok || o.Detected != n.Detected || o.Healthy != n.Healthy ||
			o.HealthDescription != n.HealthDescription || !maps.Equal(o.Attributes, n.Attributes) {
			return true
		}
	}
	return false
}

// Start restores the allocs of an earlier client process, then registers
// the node, heartbeats, watches allocations and reports their updates, all
// in the background until Shutdown.
func (c *Client) Start() error {
	c.mu.Lock()
	if c.started || c.shutdown {
		c.mu.Unlock()
		return errors.New("client already started or shut down")
	}
	c.started = true
	c.mu.Unlock()

	c.restore()
	c.sweepNetworks()
	c.goFunc(func() { c.batcher.run(c.ctx) })
	c.goFunc(func() { c.services.Run(c.ctx) })
	c.goFunc(c.run)
	if c.rcfg.CSI != nil && c.rcfg.Volumes != nil {
		c.goFunc(func() { c.rcfg.Volumes.RunController(c.ctx, c.csiNodeDetach) })
	}
	return nil
}

// Shutdown stops every goroutine of the client and waits for them. Tasks
// keep running: the next client process with the same StateDir recovers
// them. Shutdown is idempotent.
func (c *Client) Shutdown() {
	c.mu.Lock()
	c.shutdown = true
	runners := make([]*allocRunner, 0, len(c.runners))
	for _, r := range c.runners {
		runners = append(runners, r)
	}
	c.mu.Unlock()
	c.cancel()
	for _, r := range runners {
		r.shutdown()
	}
	c.wg.Wait()
	if err := c.state.close(); err != nil {
		c.logger.Warn("failed to close the state log", "error", err)
	}
}

// Destroy kills every task of every allocation (with their kill timeouts),
// waits for them until ctx ends, then shuts the client down. The dev agent
// uses it: its state is in memory, so nothing could recover the tasks.
func (c *Client) Destroy(ctx context.Context) {
	c.mu.Lock()
	// From here no new alloc starts: the server, still up in the dev
	// agent, may place a replacement for an alloc this kill stops, and a
	// task started now would outlive the agent.
	c.destroying = true
	runners := make([]*allocRunner, 0, len(c.runners))
	for _, r := range c.runners {
		runners = append(runners, r)
	}
	c.mu.Unlock()
	for _, r := range runners {
		r.destroy()
	}
	for _, r := range runners {
		select {
		case <-r.done():
		case <-ctx.Done():
		}
	}
	c.Shutdown()
}

func (c *Client) goFunc(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// restore resumes the runners persisted by an earlier client process.
func (c *Client) restore() {
	allocs, errs := c.state.allocs()
	for _, err := range errs {
		c.logger.Error("failed to restore alloc state", "error", err)
	}
	// Every staging target's users are counted before any alloc can
	// release one.
	if v := c.rcfg.Volumes; v != nil {
		for _, p := range allocs {
			v.Adopt(p.Alloc.ID, p.CSI)
		}
	}
	for _, p := range allocs {
		c.logger.Info("restoring allocation", "alloc_id", p.Alloc.ID)
		c.addRunner(p.Alloc, p)
	}
}

// run registers the node, then runs the heartbeat, watch and fingerprint
// loops until shutdown.
func (c *Client) run() {
	ctx := c.ctx
	c.fingerprintDrivers(ctx)
	ttl, ok := c.registerWithRetry(ctx)
	if !ok {
		return
	}
	c.goFunc(func() { c.heartbeatLoop(ctx, ttl) })
	c.goFunc(func() { c.watchAllocs(ctx) })
	c.goFunc(func() { c.fingerprintLoop(ctx) })
}

// csiChanged puts the CSI plugins' instances into the node and asks for
// the node to be registered again.
func (c *Client) csiChanged() {
	controllers, nodes := c.rcfg.CSI.NodePlugins()
	c.nodeMu.Lock()
	n := c.node.Copy()
	n.CSIControllerPlugins, n.CSINodePlugins = controllers, nodes
	c.node = n
	c.nodeMu.Unlock()
	select {
	case c.nodeChanged <- struct{}{}:
	default:
	}
}

// retryDelay is the capped exponential backoff of the n-th consecutive
// failure, with up to 25% jitter so a cluster of clients recovering from a
// server outage does not retry in lockstep.
func (c *Client) retryDelay(n int) time.Duration {
	d := backoff{Base: c.cfg.RetryInterval, Max: c.cfg.MaxRetryInterval}.next(n)
	return d + time.Duration(rand.Float64()*0.25*float64(d))
}

// waitOrDone waits d; it reports false when ctx ended first.
func waitOrDone(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (c *Client) registerWithRetry(ctx context.Context) (time.Duration, bool) {
	for fails := 0; ; {
		ttl, err := c.cfg.Server.RegisterNode(ctx, c.Node())
		if err == nil {
			c.logger.Info("node registered", "node_id", c.nodeID, "ttl", ttl)
			return ttl, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		fails++
		wait := c.retryDelay(fails)
		c.logger.Warn("failed to register node; retrying", "error", err, "retry_in", wait)
		if !waitOrDone(ctx, wait) {
			return 0, false
		}
	}
}

// heartbeatInterval is about half the TTL, jittered forward by up to a
// tenth of it, so that a heartbeat can be lost once without the node
// being marked down.
func heartbeatInterval(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = defaultHeartbeatTTL
	}
	return ttl/2 + time.Duration(rand.Float64()*float64(ttl)/10)
}

// heartbeatLoop keeps the node alive. The first heartbeat follows the
// registration at once: it is what moves the node to ready.
func (c *Client) heartbeatLoop(ctx context.Context, ttl time.Duration) {
	next, fails := time.Duration(0), 0
	for {
		if !waitOrDone(ctx, next) {
			return
		}
		newTTL, err := c.cfg.Server.Heartbeat(ctx, c.nodeID, c.secretID)
		switch {
		case err == nil:
			fails, ttl = 0, newTTL
			next = heartbeatInterval(ttl)
			c.registeredOnce.Do(func() { close(c.registered) })
		case ctx.Err() != nil:
			return
		case errors.Is(err, structs.ErrNotFound):
			c.logger.Warn("server does not know this node; registering again")
			var ok bool
			if ttl, ok = c.registerWithRetry(ctx); !ok {
				return
			}
			fails, next = 0, 0
		default:
			fails++
			next = c.retryDelay(fails)
			if half := ttl / 2; ttl > 0 && next > half {
				next = half
			}
			c.logger.Warn("heartbeat failed; retrying", "error", err, "retry_in", next)
		}
	}
}

// fingerprintLoop re-fingerprints the drivers and re-registers the node
// when their facts change (a plugin became healthy, or died), or when
// something else changed the node (nodeChanged). A FingerprintInterval
// below zero stops the driver re-fingerprints, not the rest.
func (c *Client) fingerprintLoop(ctx context.Context) {
	var tick <-chan time.Time
	if c.cfg.FingerprintInterval > 0 {
		t := time.NewTicker(c.cfg.FingerprintInterval)
		defer t.Stop()
		tick = t.C
	}
	var retry <-chan time.Time
	unsent := 0 // consecutive failed updates
	for {
		changed := false
		select {
		case <-ctx.Done():
			return
		case <-tick:
			changed = c.fingerprintDrivers(ctx)
			if changed {
				c.logger.Info("driver fingerprint changed; updating node")
			}
		case <-c.nodeChanged:
			changed = true
		case <-retry:
		}
		if !changed && unsent == 0 {
			continue
		}
		_, err := c.cfg.Server.RegisterNode(ctx, c.Node())
		retry = nil
		if err != nil && ctx.Err() == nil {
			c.logger.Warn("failed to update node", "error", err)
			unsent++
			retry = time.After(c.retryDelay(unsent))
			continue
		}
		unsent = 0
	}
}

// sendUpdates is the batcher's sink.
func (c *Client) sendUpdates(ctx context.Context, allocs []*structs.Allocation) error {
	return c.cfg.Server.UpdateAllocs(ctx, c.nodeID, c.secretID, allocs)
}

package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/metrics"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
	"github.com/drover-org/drover/sdk/driver"
)

// ServerConn is how the client talks to the servers. The agent implements
// it in-process for a dev agent and over RPC otherwise. Errors of kind
// structs.ErrNotFound from Heartbeat mean the server does not know the
// node (e.g. it was garbage collected): the client registers again.
type ServerConn interface {
	// RegisterNode upserts the node and returns the heartbeat TTL the
	// server expects.
	RegisterNode(ctx context.Context, node *structs.Node) (ttl time.Duration, err error)
	// Heartbeat marks the node alive (status ready); returns the next TTL.
	Heartbeat(ctx context.Context, nodeID, secretID string) (ttl time.Duration, err error)
	// Allocs blocks until the node's allocations change past minIndex (or
	// ctx/maxWait ends) and returns them all (full allocs, each with Job
	// set) and the index.
	Allocs(ctx context.Context, nodeID, secretID string, minIndex uint64, maxWait time.Duration) ([]*structs.Allocation, uint64, error)
	// UpdateAllocs reports client-side alloc state (ID, ClientStatus,
	// ClientDescription, TaskStates).
	UpdateAllocs(ctx context.Context, nodeID, secretID string, allocs []*structs.Allocation) error

	// ClaimVolume claims a CSI volume for one of the node's allocations.
	// For a new claim of a volume that needs a controller, the server has
	// it published by a controller client first; the reply carries the
	// publish context.
	ClaimVolume(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error)
	// UnpublishVolume releases a claim: the client sends it once it has
	// unpublished and unstaged, and the server does the rest (controller
	// detach, then frees the claim).
	UnpublishVolume(ctx context.Context, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error)
	// ControllerOps blocks up to args.MaxWait for controller operations
	// addressed to the node, which runs a controller plugin.
	ControllerOps(ctx context.Context, args *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error)
	// ControllerDone reports the results of controller operations.
	ControllerDone(ctx context.Context, args *structs.CSIControllerDoneArgs) error
	// UpdateServices upserts and deletes native service registrations of
	// the node's allocations.
	UpdateServices(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error
	// LookupServices reads the registrations of one service (templates'
	// nomadService), blocking while MinIndex is set and not yet passed.
	LookupServices(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error)
}

// DriverProvider hands out task drivers by name. The agent wires it to the
// plugin host, which runs drivers out of process and may replace a
// crashed plugin: the client therefore asks for a driver at each use
// instead of keeping one.
type DriverProvider interface {
	Driver(name string) (driver.Driver, error)
	Names() []string
}

// Defaults of Config.
const (
	DefaultDatacenter = "dc1"
	// Version is reported as the drover.version (and nomad.version) node
	// attribute when Config.Version is empty.
	Version = "0.1.0"

	defaultRetryInterval       = time.Second
	defaultMaxRetryInterval    = 30 * time.Second
	defaultAllocWatchWait      = 5 * time.Minute
	defaultLogPollInterval     = 250 * time.Millisecond
	defaultFingerprintInterval = 30 * time.Second
	defaultMaxKillTimeout      = 30 * time.Second
	defaultHeartbeatTTL        = 10 * time.Second
)

// Config configures a Client. Zero values take the documented defaults.
type Config struct {
	// Metrics is the agent's metrics registry; nil observes nothing.
	Metrics *metrics.Metrics
	// NodeID fixes the node's ID. When empty the ID persisted in
	// <StateDir>/node-id is used, or a new one is created and persisted,
	// so a restarted client keeps its identity (and its allocations).
	NodeID string
	// Name defaults to the hostname.
	Name string
	// Datacenter defaults to "dc1".
	Datacenter string
	NodeClass  string
	// NodePool defaults to "default".
	NodePool string
	Meta     map[string]string
	// Options are the client's `options` (e.g. driver.allowlist,
	// driver.denylist).
	Options map[string]string
	// StateDir holds the client's durable state (required).
	StateDir string
	// AllocDir is the root of alloc dirs; defaults to <StateDir>/alloc.
	AllocDir string
	// Region is used for NOMAD_REGION when a job names none.
	Region   string
	HTTPAddr string
	// Version overrides the reported drover version.
	Version string
	Logger  hclog.Logger
	// Server is required.
	Server  ServerConn
	Drivers DriverProvider
	// CSIBridge speaks CSI to the plugins that tasks run (csi_plugin
	// blocks); nil runs such tasks without supervising their plugins.
	CSIBridge csibridge.Bridge
	// ReservedResources are withheld from scheduling on this node.
	ReservedResources *structs.NodeReservedResources
	// NetworkInterface names the interface whose address the node offers
	// ports on; empty: the default route's interface, or loopback with
	// LoopbackNetwork (dev mode).
	NetworkInterface string
	LoopbackNetwork  bool
	// The range dynamic ports are picked from (0: Nomad's 20000-32000).
	MinDynamicPort, MaxDynamicPort int
	// HostVolumes are the agent config's host_volume blocks, by name:
	// fingerprinted onto the node and bound into the tasks that mount them.
	HostVolumes map[string]*structs.ClientHostVolumeConfig
	// Bridge configures allocs' own network namespaces (network_bridge.go).
	Bridge BridgeConfig

	// Test knobs.

	// UpdateBatchInterval coalesces non-terminal alloc updates (200ms).
	UpdateBatchInterval time.Duration
	// RetryInterval is the first retry delay of registration, heartbeats
	// and watches (1s); it doubles up to MaxRetryInterval (30s).
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	// AllocWatchWait is the maxWait of each blocking Allocs call (5m).
	AllocWatchWait time.Duration
	// LogPollInterval paces AllocLogs in follow mode (250ms).
	LogPollInterval time.Duration
	// FingerprintInterval paces driver re-fingerprinting (30s); a negative
	// value disables it.
	FingerprintInterval time.Duration
	// MaxKillTimeout caps a task's kill_timeout (Nomad's client
	// max_kill_timeout, 30s).
	MaxKillTimeout time.Duration
	// ProcRoot replaces /proc for the host fingerprint.
	ProcRoot string
	// CSIProbeInterval paces the probes of a CSI plugin task until it is
	// first healthy (5s); CSIHealthInterval after (30s).
	CSIProbeInterval  time.Duration
	CSIHealthInterval time.Duration
	// CSIPluginWait bounds the wait for a volume's node plugin (2m).
	CSIPluginWait time.Duration
	// CSIRetryInterval is the first retry delay of volume claims, release
	// retries and the controller loop (1s); it doubles up to
	// CSIMaxRetryInterval (1m).
	CSIRetryInterval    time.Duration
	CSIMaxRetryInterval time.Duration
}

// ErrInvalidConfig is returned by New for a config it cannot run with.
var ErrInvalidConfig = errors.New("invalid client config")

// withDefaults validates c and fills its defaults.
func (c Config) withDefaults() (Config, error) {
	if c.Server == nil {
		return c, errors.Join(ErrInvalidConfig, errors.New("Server is required"))
	}
	if c.StateDir == "" {
		return c, errors.Join(ErrInvalidConfig, errors.New("StateDir is required"))
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return c, errors.Join(ErrInvalidConfig, err)
	}
	c.StateDir = abs
	if c.AllocDir == "" {
		c.AllocDir = filepath.Join(c.StateDir, "alloc")
	}
	if c.AllocDir, err = filepath.Abs(c.AllocDir); err != nil {
		return c, errors.Join(ErrInvalidConfig, err)
	}
	if c.Name == "" {
		c.Name, _ = os.Hostname()
	}
	if c.Datacenter == "" {
		c.Datacenter = DefaultDatacenter
	}
	if c.NodePool == "" {
		c.NodePool = structs.NodePoolDefault
	}
	if c.Region == "" {
		c.Region = structs.DefaultRegion
	}
	if c.Version == "" {
		c.Version = Version
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = defaultRetryInterval
	}
	if c.MaxRetryInterval <= 0 {
		c.MaxRetryInterval = defaultMaxRetryInterval
	}
	if c.MaxRetryInterval < c.RetryInterval {
		c.MaxRetryInterval = c.RetryInterval
	}
	if c.AllocWatchWait <= 0 {
		c.AllocWatchWait = defaultAllocWatchWait
	}
	if c.LogPollInterval <= 0 {
		c.LogPollInterval = defaultLogPollInterval
	}
	if c.CSIProbeInterval <= 0 {
		c.CSIProbeInterval = 5 * time.Second
	}
	if c.CSIHealthInterval <= 0 {
		c.CSIHealthInterval = 30 * time.Second
	}
	if c.FingerprintInterval == 0 {
		c.FingerprintInterval = defaultFingerprintInterval
	}
	if c.MaxKillTimeout <= 0 {
		c.MaxKillTimeout = defaultMaxKillTimeout
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	return c, nil
}

// Package docker is the docker task driver: it runs a task as a container
// of the local Docker engine, with Nomad's docker driver's task config,
// plugin config and container layout (/alloc, /local, /secrets).
//
// Containers outlive the driver process by nature: the engine runs them.
// A task's handle records the container id; RecoverTask finds the
// container again and resumes watching it and copying its logs. Every
// container carries the labels com.drover.alloc_id, com.drover.task_name
// and com.drover.task_id, so neither a lost handle nor a restart starts a
// duplicate.
package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

const (
	// Name is the driver name jobspecs use (`driver = "docker"`).
	Name = "docker"
	// Version is this driver's version.
	Version = "0.1.0"
	// AttrDriver is the node attribute whose presence tells the scheduler
	// the driver is usable on the node.
	AttrDriver = "driver.docker"

	// fingerprintTimeout bounds one probe of the engine, so a wedged
	// engine reports unhealthy instead of hanging the client's loop.
	fingerprintTimeout = 5 * time.Second
)

// Driver is the docker driver. The zero value is not usable; call New.
type Driver struct {
	logger hclog.Logger
	cfg    *PluginConfig
	engine *client.Client

	// bg is the lifetime of the driver's goroutines (task watchers, log
	// copies); Shutdown ends it and waits for them on wg.
	bg     context.Context
	stopBg context.CancelFunc
	wg     sync.WaitGroup

	tasks driver.Tasks[*task]

	mu     sync.Mutex
	images map[string]*imageRef // image id → tasks using it
	// pendingRemovals are containers of destroyed tasks that removeLater
	// removes once the engine answers again.
	pendingRemovals map[string]struct{}

	// netMu serializes the allocations' pause containers (netns.go).
	netMu sync.Mutex
}

var _ driver.Driver = (*Driver)(nil)

// New returns a docker driver for the given plugin config (nil: the
// defaults). It does not contact the engine; Fingerprint does.
func New(logger hclog.Logger, cfg *PluginConfig) (*Driver, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg == nil {
		var err error
		if cfg, err = ParsePluginConfig(nil); err != nil {
			return nil, err
		}
	}
	// The client negotiates the API version with the engine on first
	// contact (Docker 20.10 speaks 1.41, below the client's default).
	var opts []client.Opt
	if cfg.Endpoint != "" {
		opts = append(opts, client.WithHost(cfg.Endpoint))
	} else {
		opts = append(opts, client.WithHostFromEnv())
	}
	eng, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for endpoint %q: %w", cfg.Endpoint, err)
	}
	bg, stop := context.WithCancel(context.Background())
	return &Driver{
		logger: logger.Named(Name),
		cfg:    cfg,
		engine: eng,
		bg:     bg,
		stopBg: stop,
		images: map[string]*imageRef{},

		pendingRemovals: map[string]struct{}{},
	}, nil
}

// Shutdown stops the driver's goroutines and pending image removals and
// waits for them. Containers keep running: a new driver process recovers
// them. The driver is unusable afterwards.
func (d *Driver) Shutdown() {
	d.stopBg()
	d.mu.Lock()
	for _, r := range d.images {
		if r.timer != nil {
			r.timer.Stop()
		}
	}
	d.mu.Unlock()
	d.wg.Wait()
	_ = d.engine.Close()
}

// Serve runs this process as the docker plugin, configured from
// ConfigEnvVar. A bad config is fatal: the agent validated it already, so
// it can only come from a hand-started plugin.
func Serve() {
	logger := driver.NewLogger("")
	cfg, err := ParsePluginConfig([]byte(os.Getenv(ConfigEnvVar)))
	if err != nil {
		logger.Error("invalid plugin config", "error", err)
		os.Exit(1)
	}
	d, err := New(logger, cfg)
	if err != nil {
		logger.Error("cannot create the docker client", "error", err)
		os.Exit(1)
	}
	for _, w := range cfg.Unhonoured() {
		logger.Warn("docker plugin config key accepted but not honoured", "key", w)
	}
	defer d.Shutdown()
	driver.ServeWithLogger(d, logger)
}

// Info implements driver.Driver.
func (d *Driver) Info(context.Context) (*driverpb.InfoResponse, error) {
	return &driverpb.InfoResponse{Name: Name, Version: Version, FsIsolation: driver.FSIsolationImage}, nil
}

// Fingerprint implements driver.Driver: the engine answering a ping makes
// the driver detected and healthy, with the engine's version, API version,
// OS type and runtimes as node attributes. An engine that does not answer
// makes it undetected, with the reason, so the scheduler places no docker
// task on the node.
func (d *Driver) Fingerprint(ctx context.Context) (*driverpb.FingerprintResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, fingerprintTimeout)
	defer cancel()
	endpoint := d.engine.DaemonHost()
	if _, err := d.engine.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return &driverpb.FingerprintResponse{
			HealthDescription: fmt.Sprintf("Failed to connect to the docker engine at %s: %v", endpoint, err),
		}, nil
	}
	ver, err := d.engine.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return &driverpb.FingerprintResponse{
			Detected:          true,
			HealthDescription: fmt.Sprintf("docker engine at %s does not report its version: %v", endpoint, err),
		}, nil
	}
	attrs := map[string]string{
		AttrDriver:                      "1",
		"driver.docker.version":         ver.Version,
		"driver.docker.api_version":     d.engine.ClientVersion(),
		"driver.docker.os_type":         ver.Os,
		"driver.docker.volumes.enabled": boolAttr(d.cfg.Volumes.Enabled),
	}
	if d.cfg.AllowPrivileged {
		attrs["driver.docker.privileged.enabled"] = "true"
	}
	if info, err := d.engine.Info(ctx, client.InfoOptions{}); err == nil {
		runtimes := make([]string, 0, len(info.Info.Runtimes))
		for r := range info.Info.Runtimes {
			runtimes = append(runtimes, r)
		}
		sort.Strings(runtimes)
		attrs["driver.docker.runtimes"] = strings.Join(runtimes, ",")
		if info.Info.OSType != "" {
			attrs["driver.docker.os_type"] = info.Info.OSType
		}
	}
	return &driverpb.FingerprintResponse{
		Detected: true, Healthy: true, HealthDescription: "Healthy", Attributes: attrs,
	}, nil
}

func boolAttr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// lookup returns the tracked task with this id.
func (d *Driver) lookup(id string) (*task, error) { return d.tasks.Get(id) }

// reserve claims id for a StartTask or RecoverTask in flight
// (driver.Tasks.Reserve).
func (d *Driver) reserve(id string) (tracked bool, release func(), err error) {
	return d.tasks.Reserve(id)
}

// handleState is the driver-private part of a task handle.
type handleState struct {
	Version     int     `json:"version"`
	ContainerID string  `json:"container_id"`
	ImageID     string  `json:"image_id"`
	AllocID     string  `json:"alloc_id"`
	TaskName    string  `json:"task_name"`
	KillSignal  string  `json:"kill_signal"`
	Logs        logSpec `json:"logs"`
	// Netns: the task joined its allocation's network through the
	// allocation's pause container (netns.go).
	Netns bool `json:"netns,omitempty"`
}

const stateVersion = 1

func decodeState(h *driverpb.TaskHandle) (*handleState, error) {
	var st handleState
	if err := json.Unmarshal(h.GetState(), &st); err != nil {
		return nil, fmt.Errorf("%w: handle state is not a docker driver's: %v", driver.ErrInvalidConfig, err)
	}
	if st.Version != stateVersion || st.ContainerID == "" {
		return nil, fmt.Errorf("%w: handle state is not a docker driver's (version %d, container %q)", driver.ErrInvalidConfig, st.Version, st.ContainerID)
	}
	return &st, nil
}

// ownedBy reports whether a container's labels say it runs this task.
func ownedBy(labels map[string]string, allocID, taskName string) bool {
	return labels[LabelAllocID] == allocID && labels[LabelTaskName] == taskName
}

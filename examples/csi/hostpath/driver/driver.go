// Package hostpath is drover's own small CSI driver: each volume is a
// directory under the driver's state directory, staged and published on the
// node with bind mounts. It speaks CSI spec v1.13.0 and exists so that drover's
// CSI code paths (the bridge, claims, the volume watcher) can be exercised
// end to end against a real plugin, in demos and in tests.
//
// The controller and the node service each keep their records in a JSON file
// in the state directory, rewritten atomically on every change, so a restarted
// driver still knows its volumes, which nodes they are published to, and what
// it has mounted where. The kernel's mount table (/proc/self/mountinfo) stays
// the truth for what is mounted: the node service checks it before and after
// every mount and unmount, which is what makes its RPCs idempotent.
package hostpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
)

const (
	// DriverName is the name the driver reports in GetPluginInfo.
	DriverName = "hostpath.csi.drover.dev"

	// TopologyKey is the one topology segment the driver reports: volumes
	// live on the node whose state directory holds them.
	TopologyKey = "hostpath.csi.drover.dev/node"

	// maxIDLength bounds volume and node IDs that the driver accepts, so an ID
	// always makes a sane file name.
	maxIDLength = 128

	// volumesDirName is the name of the directory that holds the volumes'
	// directories; mountEntry.volumeID relies on it.
	volumesDirName = "volumes"
)

// Version is the driver's vendor version; the build may override it with
// -ldflags "-X .../driver.Version=…".
var Version = "0.1.0"

// Mode says which CSI services one driver process serves.
type Mode string

const (
	ModeMonolith   Mode = "monolith"
	ModeController Mode = "controller"
	ModeNode       Mode = "node"
)

// ParseMode accepts the -mode flag's values.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeMonolith, ModeController, ModeNode:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q: want monolith, controller or node", s)
}

// HasController reports whether the mode serves the Controller service.
func (m Mode) HasController() bool { return m == ModeMonolith || m == ModeController }

// HasNode reports whether the mode serves the Node service.
func (m Mode) HasNode() bool { return m == ModeMonolith || m == ModeNode }

// Config configures a Driver.
type Config struct {
	// NodeID is this node's CSI node ID. The controller creates volumes on
	// this node and accepts publishes to it.
	NodeID string
	// KnownNodes are further node IDs the controller accepts in
	// ControllerPublishVolume: useful only when the state directory is shared
	// between hosts. NodeID is always known.
	KnownNodes []string
	// StateDir holds the state files, and the volumes (StateDir/volumes/<id>)
	// unless VolumesDir is set.
	StateDir string
	// VolumesDir, when set, holds the volumes' directories instead of
	// StateDir/volumes. Drivers on several nodes may share it (each with its
	// own StateDir) so that every node sees every volume. Its last element
	// must be "volumes": the driver recognises its mounts by that name.
	VolumesDir string
	// Mode selects the services served; empty means monolith.
	Mode Mode
	// MaxVolumesPerNode is reported by NodeGetInfo and enforced by
	// ControllerPublishVolume; 0 means no limit.
	MaxVolumesPerNode int64
	// Logger receives the driver's logs; nil discards them.
	Logger hclog.Logger
}

// Driver implements the CSI Identity, Controller and Node services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	cfg    Config
	logger hclog.Logger
	known  map[string]bool

	ctrl *controllerStore // nil unless the mode has a controller
	node *nodeStore       // nil unless the mode has a node
}

var (
	_ csi.IdentityServer   = (*Driver)(nil)
	_ csi.ControllerServer = (*Driver)(nil)
	_ csi.NodeServer       = (*Driver)(nil)
)

// New validates cfg, creates the state directory and loads the state files
// that an earlier run left there.
func New(cfg Config) (*Driver, error) {
	if cfg.Mode == "" {
		cfg.Mode = ModeMonolith
	}
	if _, err := ParseMode(string(cfg.Mode)); err != nil {
		return nil, err
	}
	if err := validID(cfg.NodeID); err != nil {
		return nil, fmt.Errorf("node ID: %w", err)
	}
	if cfg.StateDir == "" {
		return nil, errors.New("state directory is required")
	}
	if cfg.MaxVolumesPerNode < 0 {
		return nil, fmt.Errorf("max volumes per node is %d: must be 0 (no limit) or more", cfg.MaxVolumesPerNode)
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %q: %w", cfg.StateDir, err)
	}
	cfg.StateDir = dir
	if cfg.VolumesDir == "" {
		cfg.VolumesDir = filepath.Join(dir, volumesDirName)
	}
	if cfg.VolumesDir, err = filepath.Abs(cfg.VolumesDir); err != nil {
		return nil, fmt.Errorf("volumes directory %q: %w", cfg.VolumesDir, err)
	}
	if filepath.Base(cfg.VolumesDir) != volumesDirName {
		return nil, fmt.Errorf("volumes directory %q: its last element must be %q", cfg.VolumesDir, volumesDirName)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	if err := os.MkdirAll(cfg.VolumesDir, 0o755); err != nil {
		return nil, fmt.Errorf("create volumes directory: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	d := &Driver{
		cfg:    cfg,
		logger: cfg.Logger,
		known:  map[string]bool{cfg.NodeID: true},
	}
	for _, n := range cfg.KnownNodes {
		if err := validID(n); err != nil {
			return nil, fmt.Errorf("known node %q: %w", n, err)
		}
		d.known[n] = true
	}
	if cfg.Mode.HasController() {
		if d.ctrl, err = loadControllerStore(filepath.Join(dir, "controller-state.json")); err != nil {
			return nil, err
		}
	}
	if cfg.Mode.HasNode() {
		if d.node, err = loadNodeStore(filepath.Join(dir, "node-state.json")); err != nil {
			return nil, err
		}
	}
	d.logger.Info("driver ready", "name", DriverName, "version", Version, "mode", cfg.Mode,
		"node_id", cfg.NodeID, "state_dir", dir, "volumes_dir", cfg.VolumesDir)
	return d, nil
}

// volumePath is where the volume's data lives.
func (d *Driver) volumePath(id string) string {
	return filepath.Join(d.cfg.VolumesDir, id)
}

// volumeDirExists tells whether the volume's data directory is there: the
// node service's notion of "this volume exists", since in node mode the
// controller's records live in another process.
func (d *Driver) volumeDirExists(id string) bool {
	if validID(id) != nil {
		return false
	}
	fi, err := os.Stat(d.volumePath(id))
	return err == nil && fi.IsDir()
}

// topology is the accessible topology of every volume this driver creates.
func (d *Driver) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKey: d.cfg.NodeID}}
}

func (d *Driver) knownNodes() []string {
	out := make([]string, 0, len(d.known))
	for n := range d.known {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// validID accepts IDs that are safe as one path component.
func validID(id string) error {
	switch {
	case id == "":
		return errors.New("empty")
	case len(id) > maxIDLength:
		return fmt.Errorf("longer than %d bytes", maxIDLength)
	case id == "." || id == "..":
		return fmt.Errorf("%q is not a valid name", id)
	case strings.ContainsAny(id, "/\x00"):
		return errors.New("contains '/' or NUL")
	}
	return nil
}

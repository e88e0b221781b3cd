package csi

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// CSI plugins run as tasks (a task with a csi_plugin block). The client
// gives each such task a socket directory, tells the driver where to
// listen (CSI_ENDPOINT), and supervises it: it fingerprints the plugin
// through the csi-bridge until it is healthy, then at a slower pace, and
// reports the plugin's controller and node instances in the node's
// CSIControllerPlugins and CSINodePlugins, which the server folds into its
// plugin table. The client keeps nothing about plugins on disk: a
// restarted client finds its plugin tasks again and fingerprints them.

// Nomad's event messages of the plugin supervisor.
const (
	csiEventHealthy   = "Plugin became healthy"
	csiEventUnhealthy = structs.TaskPluginUnhealthy
)

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// is 108 bytes with its terminating NUL).
const maxSocketPath = 107

// instance is one supervised plugin task.
type instance struct {
	allocID string
	sock    string
	cfg     *structs.TaskCSIPluginConfig
	fp      *csibridge.Fingerprint // last answer; nil before the first
	healthy bool
	desc    string
	at      time.Time
}

// Plugins is the client's registry of the plugin tasks it runs.
type Plugins struct {
	bridge csibridge.Bridge
	root   string // the socket directories' root
	logger hclog.Logger
	// fast paces probes until a plugin is first healthy, slow after.
	fast, slow time.Duration
	// changed is told whenever the node's plugins change.
	changed func()

	mu        sync.Mutex
	instances map[string]*instance // by alloc ID + "/" + task
	// wake is closed (and replaced) at every change of instances.
	wake chan struct{}
}

func NewPlugins(bridge csibridge.Bridge, root string, fast, slow time.Duration, logger hclog.Logger, changed func()) *Plugins {
	return &Plugins{bridge: bridge, root: root, fast: fast, slow: slow, logger: logger, changed: changed,
		instances: map[string]*instance{}, wake: make(chan struct{})}
}

// watch returns a channel closed at the next change of the instances.
func (p *Plugins) watch() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wake
}

// wakeLocked tells the watchers; it needs p.mu.
func (p *Plugins) wakeLocked() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// healthyInstance finds a healthy instance of plugin id serving the node
// (node true) or controller service, and returns its socket and
// fingerprint.
func (p *Plugins) healthyInstance(id string, node bool) (string, csibridge.Fingerprint, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, key := range sortedKeys(p.instances) {
		inst := p.instances[key]
		if inst.cfg.ID != id || !inst.healthy || inst.fp == nil || inst.sock == "" {
			continue
		}
		if node && inst.cfg.HasNode() && inst.fp.HasNode || !node && inst.cfg.HasController() && inst.fp.HasController {
			return inst.sock, *inst.fp, true
		}
	}
	return "", csibridge.Fingerprint{}, false
}

// serving reports whether a healthy instance of any plugin, controller
// or node, runs here.
func (p *Plugins) serving() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, inst := range p.instances {
		if inst.healthy && inst.fp != nil && (inst.fp.HasController && inst.cfg.HasController() || inst.fp.HasNode && inst.cfg.HasNode()) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// socketDir is the host directory of a plugin task's socket. It is short
// (the alloc ID's first 8 characters and the task's index would do; the
// task name keeps it readable) because a unix socket path is bounded.
func (p *Plugins) socketDir(allocID, task string) string {
	return filepath.Join(p.root, shortID(allocID)+"-"+task)
}

// Prepare creates a plugin task's socket directory and returns the
// socket path the task is told to listen on.
func (p *Plugins) Prepare(allocID, task string) (string, error) {
	dir := p.socketDir(allocID, task)
	sock := filepath.Join(dir, "csi.sock")
	if len(sock) > maxSocketPath {
		return "", fmt.Errorf("csi_plugin: socket path %s is %d bytes, longer than the %d a unix socket allows; use a shorter data_dir",
			sock, len(sock), maxSocketPath)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("csi_plugin: create socket dir: %w", err)
	}
	return sock, nil
}

// Supervise probes a plugin task's socket until stop closes, reporting
// each change of health as a task event through emit and to the node.
// Before the plugin is first healthy it probes every p.fast, and reports
// it unhealthy once health_timeout has passed; after, every p.slow.
func (p *Plugins) Supervise(ctx context.Context, stop <-chan struct{}, allocID, task string,
	cfg *structs.TaskCSIPluginConfig, sock string, emit func(*structs.TaskEvent)) {
	key := allocID + "/" + task
	log := p.logger.With("plugin_id", cfg.ID, "alloc_id", allocID, "task", task)
	inst := &instance{allocID: allocID, sock: sock, cfg: cfg}
	deadline := time.Now().Add(cfg.HealthTimeout)
	everHealthy, toldUnhealthy := false, false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fp, err := p.bridge.Fingerprint(pctx, csibridge.FingerprintRequest{Socket: sock})
		cancel()
		healthy, desc := false, ""
		switch {
		case err != nil:
			desc = err.Error()
		case !fp.Healthy:
			desc = fp.HealthDescription
		default:
			healthy, desc = true, "healthy"
		}
		was := inst.healthy
		// A failed probe keeps what the plugin last said of itself: the
		// node still reports the instance, unhealthy.
		if fp != nil {
			inst.fp = fp
		}
		inst.healthy, inst.desc, inst.at = healthy, desc, time.Now().UTC()
		switch {
		case healthy && !was:
			everHealthy, toldUnhealthy = true, false
			log.Info("csi plugin healthy", "provider", fp.PluginName, "version", fp.Version)
			emit(structs.NewTaskEvent(csiEventHealthy, csiEventHealthy))
			p.put(key, inst)
		case !healthy && was:
			log.Warn("csi plugin unhealthy", "reason", desc)
			emit(structs.NewTaskEvent(csiEventUnhealthy, csiEventUnhealthy+": "+desc))
			toldUnhealthy = true
			p.put(key, inst)
		case !healthy && !everHealthy && !toldUnhealthy && time.Now().After(deadline):
			log.Warn("csi plugin not healthy within health_timeout", "health_timeout", cfg.HealthTimeout, "reason", desc)
			emit(structs.NewTaskEvent(csiEventUnhealthy,
				fmt.Sprintf("%s: not healthy within health_timeout %s: %s", csiEventUnhealthy, cfg.HealthTimeout, desc)))
			toldUnhealthy = true
		case healthy && fingerprintChanged(p.get(key), fp):
			p.put(key, inst)
		}
		next := p.slow
		if !everHealthy {
			next = p.fast
		}
		timer.Reset(next)
	}
}

func fingerprintChanged(old *instance, fp *csibridge.Fingerprint) bool {
	if old == nil || old.fp == nil || fp == nil {
		return true
	}
	a, b := *old.fp, *fp
	return a.PluginName != b.PluginName || a.Version != b.Version || a.NodeID != b.NodeID ||
		a.MaxVolumes != b.MaxVolumes || !maps.Equal(a.AccessibleTopology, b.AccessibleTopology) ||
		a.ControllerCaps != b.ControllerCaps || a.NodeCaps != b.NodeCaps
}

func (p *Plugins) get(key string) *instance {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.instances[key]
}

func (p *Plugins) put(key string, inst *instance) {
	c := *inst
	p.mu.Lock()
	p.instances[key] = &c
	p.wakeLocked()
	p.mu.Unlock()
	p.changed()
}

// Remove forgets a plugin task that is gone for good and removes its
// socket directory.
func (p *Plugins) Remove(allocID, task string) {
	key := allocID + "/" + task
	p.mu.Lock()
	_, had := p.instances[key]
	delete(p.instances, key)
	if had {
		p.wakeLocked()
	}
	p.mu.Unlock()
	if err := os.RemoveAll(p.socketDir(allocID, task)); err != nil {
		p.logger.Warn("failed to remove csi socket dir", "error", err)
	}
	if had {
		p.changed()
	}
}

// NodePlugins is what the node reports: every plugin's controller and
// node instances, from the instances ever healthy. Two tasks of one
// plugin on a node report the healthier (then the later) one.
func (p *Plugins) NodePlugins() (controllers, nodes map[string]*structs.CSIInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	controllers, nodes = map[string]*structs.CSIInfo{}, map[string]*structs.CSIInfo{}
	for _, inst := range p.instances {
		if inst.fp == nil {
			continue
		}
		info := csiInfo(inst)
		if inst.cfg.HasController() && inst.fp.HasController {
			c := info.Copy()
			c.NodeInfo = nil
			keepBetter(controllers, inst.cfg.ID, c)
		}
		if inst.cfg.HasNode() && inst.fp.HasNode {
			n := info.Copy()
			n.ControllerInfo = nil
			keepBetter(nodes, inst.cfg.ID, n)
		}
	}
	return controllers, nodes
}

func keepBetter(m map[string]*structs.CSIInfo, id string, info *structs.CSIInfo) {
	if old, ok := m[id]; ok && (old.Healthy && !info.Healthy || old.Healthy == info.Healthy && old.UpdateTime.After(info.UpdateTime)) {
		return
	}
	m[id] = info
}

// csiInfo turns a supervised plugin's fingerprint into the node's report.
func csiInfo(inst *instance) *structs.CSIInfo {
	fp := inst.fp
	info := &structs.CSIInfo{
		PluginID: inst.cfg.ID, AllocID: inst.allocID, Healthy: inst.healthy, HealthDescription: truncate(inst.desc, structs.MaxCSIInfoTextBytes),
		UpdateTime: inst.at, Provider: truncate(fp.PluginName, structs.MaxCSIInfoTextBytes), ProviderVersion: truncate(fp.Version, structs.MaxCSIInfoTextBytes),
		RequiresControllerPlugin: fp.HasController, RequiresTopologies: fp.RequiresTopologies,
	}
	if fp.HasController {
		cc := fp.ControllerCaps
		info.ControllerInfo = &structs.CSIControllerInfo{
			SupportsCreateDelete: cc.CreateDelete, SupportsAttachDetach: cc.PublishUnpublish, SupportsListVolumes: cc.ListVolumes,
			SupportsGetCapacity: cc.GetCapacity, SupportsCreateDeleteSnapshot: cc.CreateDeleteSnapshot, SupportsListSnapshots: cc.ListSnapshots,
			SupportsClone: cc.Clone, SupportsReadOnlyAttach: cc.ReadOnly, SupportsExpand: cc.Expand,
			SupportsListVolumesAttachedNodes: cc.ListVolumesPublishedNodes, SupportsCondition: cc.VolumeCondition, SupportsGet: cc.GetVolume,
		}
	}
	if fp.HasNode {
		ni := &structs.CSINodeInfo{ID: truncate(fp.NodeID, structs.MaxCSIInfoTextBytes), MaxVolumes: fp.MaxVolumes,
			RequiresNodeStageVolume: fp.NodeCaps.StageUnstage, SupportsStats: fp.NodeCaps.GetVolumeStats,
			SupportsExpand: fp.NodeCaps.Expand, SupportsCondition: fp.NodeCaps.VolumeCondition}
		if len(fp.AccessibleTopology) > 0 && len(fp.AccessibleTopology) <= structs.MaxCSITopologySegments {
			ni.AccessibleTopology = &structs.CSITopology{Segments: maps.Clone(fp.AccessibleTopology)}
		}
		info.NodeInfo = ni
	}
	return info
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// shortID is an alloc ID's first 8 characters.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

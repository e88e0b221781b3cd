package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// Defaults of the volume hook. A node plugin call that fails as
// unavailable, aborted or out of time is made NodeCallAttempts times,
// NodeCallRetryBase apart, doubling.
const (
	DefaultPluginWait     = 2 * time.Minute
	DefaultRetryBase      = time.Second
	DefaultRetryMax       = time.Minute
	callTimeout           = 2 * time.Minute
	NodeCallAttempts      = 3
	NodeCallRetryBase     = 100 * time.Millisecond
	nodeDirName           = "node"
	stagingDirName        = "staging"
	perAllocDirName       = "per-alloc"
	volumeSetupFailPrefix = "failed to set up volume"
)

// MountState is one volume of an alloc as far as the client got with
// it, as persisted with the alloc. No secret nor publish context is kept:
// releasing needs neither.
type MountState struct {
	Alias          string
	VolumeID       string
	Namespace      string
	PluginID       string `json:",omitempty"`
	ExternalID     string `json:",omitempty"`
	Mode           structs.CSIVolumeClaimMode
	AccessMode     structs.CSIVolumeAccessMode
	AttachmentMode structs.CSIVolumeAttachmentMode
	ReadOnly       bool   `json:",omitempty"`
	Usage          string `json:",omitempty"`
	StagingPath    string `json:",omitempty"` // empty: the plugin does not stage
	TargetPath     string `json:",omitempty"`
	// Claimed: the server holds a claim to release. Staged: this alloc
	// is a user of the staging target. Published: the target may be
	// published. Binds are the task bind mounts that may exist.
	Claimed   bool     `json:",omitempty"`
	Staged    bool     `json:",omitempty"`
	Published bool     `json:",omitempty"`
	Binds     []string `json:",omitempty"`
	// BindIDs are the kernel's mount IDs of the Binds made (by target):
	// a task that renames a directory above a bind moves the mount, and
	// unbind finds it by its ID.
	BindIDs map[string]uint64 `json:",omitempty"`
	Ready   bool              `json:",omitempty"`
}

func (m *MountState) copy() *MountState {
	c := *m
	c.Binds = slices.Clone(m.Binds)
	c.BindIDs = maps.Clone(m.BindIDs)
	return &c
}

// Server is what the client's CSI code asks of the servers.
type Server interface {
	// ClaimVolume claims a volume for one of the node's allocations;
	// the reply carries the publish context.
	ClaimVolume(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error)
	// UnpublishVolume reports how far the node got with a claim's
	// release (unpublishing, node-detached); the servers take it from
	// there to freed.
	UnpublishVolume(ctx context.Context, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error)
	// ControllerOps blocks up to args.MaxWait for the controller (and
	// node-detach) operations addressed to the node.
	ControllerOps(ctx context.Context, args *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error)
	// ControllerDone reports the results of those operations.
	ControllerDone(ctx context.Context, args *structs.CSIControllerDoneArgs) error
}

// Config configures a Manager. Zero durations take the defaults.
type Config struct {
	// Plugins are the node's plugin tasks; Bridge calls them.
	Plugins *Plugins
	Bridge  csibridge.Bridge
	Server  Server
	// NodeID and SecretID are the node's identity with the servers.
	NodeID, SecretID string
	// StateDir is the client's state dir: volumes are staged and
	// published beneath <StateDir>/csi/node.
	StateDir string
	// PluginWait bounds the wait for a volume's node plugin to be healthy
	// (default 2m).
	PluginWait time.Duration
	// RetryBase and RetryMax bound the backoff of claims and of
	// background releases (defaults 1s and 1m).
	RetryBase, RetryMax time.Duration
	Logger              hclog.Logger
	// Go runs a goroutine the client owns: it must end when the ctx
	// given to NewManager does, which the goroutines it runs watch.
	Go func(func())
}

// csiUsage counts the allocs using one staging target; its lock orders
// the stage and unstage calls of that target.
type csiUsage struct {
	mu    sync.Mutex
	users map[string]bool
}

// Manager is the client's part of the volume hook that alloc runners
// share: the usage counts of staging targets, the background release
// retries and the controller executor.
type Manager struct {
	plugins *Plugins
	bridge  csibridge.Bridge
	server  Server
	nodeID  string
	secret  string
	root    string // <StateDir>/csi/node
	logger  hclog.Logger
	// ctx ends with the client; spawn runs an owned goroutine.
	ctx   context.Context
	spawn func(func())

	pluginWait time.Duration
	retry      backoff

	mu     sync.Mutex
	usages map[string]*csiUsage
}

// NewManager returns the client's volume manager; ctx ends with the
// client.
func NewManager(ctx context.Context, cfg Config) *Manager {
	if cfg.PluginWait <= 0 {
		cfg.PluginWait = DefaultPluginWait
	}
	retry := backoff{Base: cfg.RetryBase, Max: cfg.RetryMax}
	if retry.Base <= 0 {
		retry.Base = DefaultRetryBase
	}
	if retry.Max < retry.Base {
		retry.Max = max(DefaultRetryMax, retry.Base)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Manager{plugins: cfg.Plugins, bridge: cfg.Bridge, server: cfg.Server, nodeID: cfg.NodeID, secret: cfg.SecretID,
		root: filepath.Join(cfg.StateDir, "csi", nodeDirName), logger: cfg.Logger, ctx: ctx, spawn: cfg.Go,
		pluginWait: cfg.PluginWait, retry: retry, usages: map[string]*csiUsage{}}
}

func usageKey(m *MountState) string { return m.PluginID + "/" + m.StagingPath }

func (mgr *Manager) usage(key string) *csiUsage {
	mgr.mu.Lock()
	defer mgr.mu.Unlock()
	u := mgr.usages[key]
	if u == nil {
		u = &csiUsage{users: map[string]bool{}}
		mgr.usages[key] = u
	}
	return u
}

// Adopt counts a restored alloc's uses of staging targets. The client
// adopts every restored alloc's volumes before any alloc runs, so that no
// release unstages a target another alloc still uses.
func (mgr *Manager) Adopt(allocID string, restored []*MountState) {
	for _, m := range restored {
		if m == nil || !m.Staged || m.StagingPath == "" {
			continue
		}
		u := mgr.usage(usageKey(m))
		u.mu.Lock()
		u.users[allocID] = true
		u.mu.Unlock()
	}
}

// backoff computes capped exponential retry delays.
type backoff struct {
	Base, Max time.Duration
}

// next returns the delay before retry number n (1-based).
func (b backoff) next(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
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

// usageName is Nomad's usage: ro-|rw-, attachment, access.
func usageName(readOnly bool, attach structs.CSIVolumeAttachmentMode, access structs.CSIVolumeAccessMode) string {
	p := "rw-"
	if readOnly {
		p = "ro-"
	}
	return p + string(attach) + "-" + string(access)
}

// pathElem refuses an ID that cannot be one path element.
func pathElem(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/\\\x00") {
		return fmt.Errorf("%s %q cannot be a directory name", what, s)
	}
	return nil
}

// volumeAliases are the group's CSI volumes, sorted.
func volumeAliases(tg *structs.TaskGroup) []string {
	var out []string
	for _, alias := range slices.Sorted(maps.Keys(tg.Volumes)) {
		if v := tg.Volumes[alias]; v != nil && v.Type == structs.VolumeTypeCSI {
			out = append(out, alias)
		}
	}
	return out
}

// retryableClaimErr tells the claim errors worth waiting out.
func retryableClaimErr(err error) bool {
	switch {
	case errors.Is(err, structs.ErrUnavailable), errors.Is(err, structs.ErrNoLeader):
		return true
	case errors.Is(err, structs.ErrConflict):
		// No kind tells a full volume from another conflict; Nomad's
		// message does.
		return strings.Contains(err.Error(), structs.CSIErrMaxClaims)
	}
	return false
}

// claim claims the volume, retrying what may pass, until ctx ends.
func (mgr *Manager) claim(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	for n := 1; ; n++ {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		reply, err := mgr.server.ClaimVolume(cctx, args)
		cancel()
		if err == nil {
			if reply == nil || reply.Volume == nil || reply.Volume.PluginID == "" {
				return nil, errors.New("claim reply names no volume plugin")
			}
			return reply, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("claim: %w (%v)", ctx.Err(), err)
		}
		if !retryableClaimErr(err) {
			return nil, fmt.Errorf("claim: %w", err)
		}
		wait := mgr.retry.next(n)
		mgr.logger.Warn("volume claim failed; retrying", "volume_id", args.VolumeID, "alloc_id", args.AllocationID, "error", err, "retry_in", wait)
		if !waitOrDone(ctx, wait) {
			return nil, fmt.Errorf("claim: %w (%v)", ctx.Err(), err)
		}
	}
}

// waitNodePlugin waits up to pluginWait for a healthy node instance of
// the plugin on this node.
func (mgr *Manager) waitNodePlugin(ctx context.Context, pluginID string) (string, csibridge.Fingerprint, error) {
	timer := time.NewTimer(mgr.pluginWait)
	defer timer.Stop()
	for {
		ch := mgr.plugins.watch()
		if sock, fp, ok := mgr.plugins.healthyInstance(pluginID, true); ok {
			return sock, fp, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return "", csibridge.Fingerprint{}, fmt.Errorf("node plugin %q is not healthy on this node after %s", pluginID, mgr.pluginWait)
		case <-ctx.Done():
			return "", csibridge.Fingerprint{}, fmt.Errorf("waiting for node plugin %q: %w", pluginID, ctx.Err())
		}
	}
}

// nodeCall runs a node RPC with a timeout, retrying a few times the
// errors that say "later".
func nodeCall(ctx context.Context, call func(context.Context) error) error {
	var err error
	for i := range NodeCallAttempts {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err = call(cctx)
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, csibridge.ErrUnavailable) || errors.Is(err, csibridge.ErrAborted) ||
			errors.Is(err, csibridge.ErrResourceExhausted) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		if i+1 < NodeCallAttempts && !waitOrDone(ctx, NodeCallRetryBase<<i) {
			return err
		}
	}
	return err
}

func capability(req *structs.VolumeRequest, vol *structs.CSIVolume) csibridge.Capability {
	c := csibridge.Capability{AccessMode: string(req.AccessMode), AttachmentMode: string(req.AttachmentMode)}
	if req.AttachmentMode != structs.CSIVolumeAttachmentModeFilesystem {
		return c
	}
	if mo := vol.MountOptions; mo != nil {
		c.FSType, c.MountFlags = mo.FSType, slices.Clone(mo.MountFlags)
	}
	if mo := req.MountOptions; mo != nil {
		if mo.FSType != "" {
			c.FSType = mo.FSType
		}
		if len(mo.MountFlags) > 0 {
			c.MountFlags = slices.Clone(mo.MountFlags)
		}
	}
	return c
}

package csi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// The controller executor: the leader cannot call a client, so a client
// running a healthy controller plugin polls the leader for controller
// operations addressed to it, runs each through the csi-bridge against
// the plugin's socket and reports the results. Ops of one plugin run one
// at a time, in the order given.
//
// The same channel carries the node-detach of `volume detach`: the leader
// addresses it to the node of the claim, and the client unpublishes and
// unstages that allocation's volume as its own release would. So a client
// polls while it runs a healthy instance of any CSI plugin, controller or
// node: a node that mounts volumes runs the volumes' node plugins, and
// one that runs none could not unpublish anything (the detach then fails
// as unavailable after the pickup time, naming the node).

const controllerPollWait = 30 * time.Second

// NodeDetacher runs a node-detach op of the leader: the alloc's
// Volumes.NodeDetach, found by op.AllocationID. An alloc the client does
// not run has nothing mounted here.
type NodeDetacher func(ctx context.Context, op *structs.CSIControllerOp) error

// RunController is the controller executor: while a healthy plugin runs
// here, it polls the leader for the ops addressed to the node, runs them
// (node-detach ops through detach) and reports the results. It returns
// when ctx ends.
func (mgr *Manager) RunController(ctx context.Context, detach NodeDetacher) {
	p := mgr.plugins
	retry := mgr.retry
	fails := 0
	for {
		ch := p.watch()
		if !p.serving() {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return
			}
		}
		pctx, cancel := context.WithTimeout(ctx, controllerPollWait+30*time.Second)
		reply, err := mgr.server.ControllerOps(pctx, &structs.CSIControllerPollArgs{
			NodeID: mgr.nodeID, SecretID: mgr.secret, MaxWait: int64(controllerPollWait)})
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			fails++
			wait := retry.next(fails)
			mgr.logger.Warn("failed to poll controller operations; retrying", "error", err, "retry_in", wait)
			if !waitOrDone(ctx, wait) {
				return
			}
			continue
		}
		fails = 0
		if reply == nil || len(reply.Ops) == 0 {
			continue
		}
		results := runControllerOps(ctx, p, mgr.bridge, reply.Ops, callTimeout, detach)
		if ctx.Err() != nil {
			return
		}
		for n := 1; n <= 5; n++ {
			dctx, cancel := context.WithTimeout(ctx, callTimeout)
			err = mgr.server.ControllerDone(dctx, &structs.CSIControllerDoneArgs{NodeID: mgr.nodeID, SecretID: mgr.secret, Results: results})
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			mgr.logger.Warn("failed to report controller results; retrying", "error", err)
			if !waitOrDone(ctx, retry.next(n)) {
				return
			}
		}
	}
}

// runControllerOps runs ops, one plugin's after another in order and
// the plugins in parallel, each op within timeout; results are in the
// order of ops. Node-detach ops go to detach.
func runControllerOps(ctx context.Context, p *Plugins, bridge csibridge.Bridge, ops []*structs.CSIControllerOp,
	timeout time.Duration, detach NodeDetacher) []*structs.CSIControllerOpResult {
	results := make([]*structs.CSIControllerOpResult, len(ops))
	byPlugin := map[string][]int{}
	for i, op := range ops {
		if op == nil {
			results[i] = &structs.CSIControllerOpResult{ErrorKind: "invalid", Error: "empty operation"}
			continue
		}
		byPlugin[op.PluginID] = append(byPlugin[op.PluginID], i)
	}
	var wg sync.WaitGroup
	for _, idx := range byPlugin {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range idx {
				if ops[i].Kind == structs.CSIControllerOpNodeDetach {
					results[i] = runNodeDetach(ctx, ops[i], timeout, detach)
					continue
				}
				results[i] = runControllerOp(ctx, p, bridge, ops[i], timeout)
			}
		}()
	}
	wg.Wait()
	return results
}

// runControllerOp runs one op against the plugin's healthy controller,
// within timeout.
func runControllerOp(ctx context.Context, p *Plugins, bridge csibridge.Bridge, op *structs.CSIControllerOp,
	timeout time.Duration) *structs.CSIControllerOpResult {
	res := &structs.CSIControllerOpResult{ID: op.ID}
	sock, _, ok := p.healthyInstance(op.PluginID, false)
	if !ok {
		return failResult(res, structs.NewError(structs.ErrUnavailable, "no healthy controller of plugin %q on this node", op.PluginID))
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	capab := csibridge.Capability{AccessMode: string(op.AccessMode), AttachmentMode: string(op.AttachmentMode)}
	if op.MountOptions != nil && op.AttachmentMode == structs.CSIVolumeAttachmentModeFilesystem {
		capab.FSType, capab.MountFlags = op.MountOptions.FSType, append([]string(nil), op.MountOptions.MountFlags...)
	}
	var err error
	switch op.Kind {
	case structs.CSIControllerOpPublish:
		var pc map[string]string
		pc, err = bridge.ControllerPublish(cctx, csibridge.ControllerPublishRequest{Socket: sock, VolumeID: op.ExternalVolumeID,
			NodeID: op.ExternalNodeID, Capability: capab, ReadOnly: op.ReadOnly, Secrets: maps.Clone(op.Secrets),
			VolumeContext: maps.Clone(op.VolumeContext)})
		if err == nil && len(pc) > structs.MaxCSIPublishContextEntries {
			err = structs.NewError(structs.ErrInvalid, "publish context of %d entries, more than %d", len(pc), structs.MaxCSIPublishContextEntries)
		}
		if err == nil {
			res.PublishContext = pc
		}
	case structs.CSIControllerOpUnpublish:
		err = bridge.ControllerUnpublish(cctx, csibridge.ControllerUnpublishRequest{Socket: sock, VolumeID: op.ExternalVolumeID,
			NodeID: op.ExternalNodeID, Secrets: maps.Clone(op.Secrets)})
		if errors.Is(err, csibridge.ErrNotFound) {
			err = nil // already detached
		}
	case structs.CSIControllerOpDelete:
		err = bridge.DeleteVolume(cctx, csibridge.DeleteVolumeRequest{Socket: sock, ExternalID: op.ExternalVolumeID, Secrets: maps.Clone(op.Secrets)})
		if errors.Is(err, csibridge.ErrNotFound) {
			err = nil // already gone
		}
	case structs.CSIControllerOpCreate:
		res.Created, err = createVolume(cctx, bridge, sock, op)
	case structs.CSIControllerOpValidate:
		res.Validation, err = validateVolume(cctx, bridge, sock, op)
	default:
		err = structs.NewError(structs.ErrInvalid, "unknown controller operation %q", op.Kind)
	}
	if err != nil && ctx.Err() == nil && ranOutOfTime(cctx) {
		// The call ran out of its time: how gRPC words that depends on
		// which side saw it first (deadline exceeded, or a cancelled
		// stream); say it once, with the bound.
		err = structs.NewError(structs.ErrUnavailable, "controller %s of volume %q: deadline exceeded after %s: %v",
			op.Kind, op.ExternalVolumeID, timeout, err)
	}
	if err != nil {
		return failResult(res, err)
	}
	return res
}

// runNodeDetach runs a node-detach op within timeout.
func runNodeDetach(ctx context.Context, op *structs.CSIControllerOp, timeout time.Duration, detach NodeDetacher) *structs.CSIControllerOpResult {
	res := &structs.CSIControllerOpResult{ID: op.ID}
	if detach == nil {
		return failResult(res, structs.NewError(structs.ErrUnavailable, "this client mounts no CSI volumes"))
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := detach(cctx, op)
	if err != nil && ctx.Err() == nil && ranOutOfTime(cctx) {
		err = structs.NewError(structs.ErrUnavailable, "node-detach of volume %q: deadline exceeded after %s: %v", op.VolumeID, timeout, err)
	}
	if err != nil {
		return failResult(res, err)
	}
	return res
}

// deadlineSlack: a call that fails this close to its deadline ran out of
// its time. The far side may act on the deadline a moment before this side
// does (gRPC carries the timeout with coarse precision, through the
// csi-bridge process), cancelling the stream while this side's context is
// still live.
const deadlineSlack = 100 * time.Millisecond

// ranOutOfTime reports whether a call under cctx failed for its deadline.
func ranOutOfTime(cctx context.Context) bool {
	if errors.Is(cctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := cctx.Deadline()
	return ok && time.Until(dl) < deadlineSlack
}

func createVolume(ctx context.Context, bridge csibridge.Bridge, sock string, op *structs.CSIControllerOp) (*structs.CSIVolume, error) {
	v := op.Create
	if v == nil {
		return nil, structs.NewError(structs.ErrInvalid, "create operation without a volume")
	}
	req := csibridge.CreateVolumeRequest{Socket: sock, Name: v.Name, CapacityMin: v.RequestedCapacityMin, CapacityMax: v.RequestedCapacityMax,
		Parameters: maps.Clone(v.Parameters), Secrets: maps.Clone(op.Secrets)}
	if req.Secrets == nil {
		req.Secrets = maps.Clone(v.Secrets)
	}
	for _, rc := range v.RequestedCapabilities {
		if rc == nil {
			continue
		}
		c := csibridge.Capability{AccessMode: string(rc.AccessMode), AttachmentMode: string(rc.AttachmentMode)}
		if v.MountOptions != nil && rc.AttachmentMode == structs.CSIVolumeAttachmentModeFilesystem {
			c.FSType, c.MountFlags = v.MountOptions.FSType, append([]string(nil), v.MountOptions.MountFlags...)
		}
		req.Capabilities = append(req.Capabilities, c)
	}
	switch {
	case v.SnapshotID != "":
		req.ContentSource = &csibridge.ContentSource{SnapshotID: v.SnapshotID}
	case v.CloneID != "":
		req.ContentSource = &csibridge.ContentSource{VolumeID: v.CloneID}
	}
	if rt := v.RequestedTopologies; rt != nil {
		for _, t := range rt.Required {
			if t != nil {
				req.TopologyRequired = append(req.TopologyRequired, maps.Clone(t.Segments))
			}
		}
		for _, t := range rt.Preferred {
			if t != nil {
				req.TopologyPreferred = append(req.TopologyPreferred, maps.Clone(t.Segments))
			}
		}
	}
	cv, err := bridge.CreateVolume(ctx, req)
	if err != nil {
		return nil, err
	}
	if cv == nil {
		return nil, errors.New("the plugin created no volume")
	}
	out := &structs.CSIVolume{ExternalID: cv.ExternalID, Capacity: cv.CapacityBytes, Context: maps.Clone(cv.Context)}
	for _, t := range cv.Topologies {
		out.Topologies = append(out.Topologies, &structs.CSITopology{Segments: maps.Clone(t)})
	}
	return out, nil
}

// validateVolume asks the driver whether the volume supports the op's
// capabilities. A driver (or csi-bridge) without the call is answered as
// Unsupported rather than failed: ValidateVolumeCapabilities is mandatory
// in CSI, but a volume registered against such a driver worked before
// validation existed and must keep working.
func validateVolume(ctx context.Context, bridge csibridge.Bridge, sock string, op *structs.CSIControllerOp) (*structs.CSIVolumeValidation, error) {
	req := csibridge.ValidateVolumeCapabilitiesRequest{Socket: sock, VolumeID: op.ExternalVolumeID,
		Parameters: maps.Clone(op.Parameters), VolumeContext: maps.Clone(op.VolumeContext), Secrets: maps.Clone(op.Secrets)}
	for _, rc := range op.Capabilities {
		if rc == nil {
			continue
		}
		c := csibridge.Capability{AccessMode: string(rc.AccessMode), AttachmentMode: string(rc.AttachmentMode)}
		if op.MountOptions != nil && rc.AttachmentMode == structs.CSIVolumeAttachmentModeFilesystem {
			c.FSType, c.MountFlags = op.MountOptions.FSType, append([]string(nil), op.MountOptions.MountFlags...)
		}
		req.Capabilities = append(req.Capabilities, c)
	}
	v, err := bridge.ValidateVolumeCapabilities(ctx, req)
	switch {
	case errors.Is(err, csibridge.ErrUnimplemented), status.Code(err) == codes.Unimplemented:
		return &structs.CSIVolumeValidation{Unsupported: true, Message: boundText(err.Error())}, nil
	case err != nil:
		return nil, err
	case v == nil:
		return nil, errors.New("the plugin gave no answer to ValidateVolumeCapabilities")
	}
	return &structs.CSIVolumeValidation{Confirmed: v.Confirmed, Message: boundText(v.Message)}, nil
}

// boundText cuts s to MaxCSIErrorBytes on a rune boundary.
func boundText(s string) string {
	if len(s) > structs.MaxCSIErrorBytes {
		s = s[:structs.MaxCSIErrorBytes]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

// csiErrorKind is the wire kind of a controller op's error.
func csiErrorKind(err error) string {
	switch {
	case errors.Is(err, csibridge.ErrNotFound):
		return "not_found"
	case errors.Is(err, csibridge.ErrUnavailable), errors.Is(err, csibridge.ErrAborted),
		errors.Is(err, csibridge.ErrFailedPrecondition), errors.Is(err, csibridge.ErrResourceExhausted),
		errors.Is(err, context.DeadlineExceeded):
		return "unavailable"
	case errors.Is(err, csibridge.ErrInvalidArgument), errors.Is(err, csibridge.ErrOutOfRange), errors.Is(err, csibridge.ErrUnimplemented):
		return "invalid"
	case errors.Is(err, csibridge.ErrAlreadyExists):
		return "conflict"
	}
	return structs.KindName(err)
}

func failResult(res *structs.CSIControllerOpResult, err error) *structs.CSIControllerOpResult {
	res.ErrorKind = csiErrorKind(err)
	msg := err.Error()
	if msg == "" {
		msg = fmt.Sprintf("%T", err)
	}
	res.Error = boundText(msg)
	res.PublishContext, res.Created, res.Validation = nil, nil, nil
	return res
}

package bridge

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/csibridge"
)

// Fingerprint implements csibridge.Bridge: GetPluginInfo,
// GetPluginCapabilities and Probe, then the capability RPCs of the
// services the driver has. A driver may be controller-only, node-only or
// both; a service is absent when the plugin capabilities leave it out
// (controller) or its RPC answers Unimplemented.
func (b *Bridge) Fingerprint(ctx context.Context, req csibridge.FingerprintRequest) (*csibridge.Fingerprint, error) {
	var fp *csibridge.Fingerprint
	err := b.call(ctx, "Fingerprint", req.Socket, "", func(ctx context.Context, c clients) (err error) {
		fp, err = fingerprint(ctx, c)
		return err
	})
	return fp, err
}

func fingerprint(ctx context.Context, c clients) (*csibridge.Fingerprint, error) {
	info, err := c.identity.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return nil, rpcErr("GetPluginInfo", err)
	}
	fp := &csibridge.Fingerprint{PluginName: info.GetName(), Version: info.GetVendorVersion()}
	if fp.PluginName == "" {
		return nil, invalidDriverReply("GetPluginInfo gave no plugin name")
	}

	// A driver without GetPluginCapabilities advertises nothing; whether
	// it has a controller is then up to ControllerGetCapabilities.
	askController := true
	pcaps, err := c.identity.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
	case err != nil:
		return nil, rpcErr("GetPluginCapabilities", err)
	default:
		askController = false
		for _, pc := range pcaps.GetCapabilities() {
			switch pc.GetService().GetType() {
			case csi.PluginCapability_Service_CONTROLLER_SERVICE:
				askController = true
			case csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS:
				fp.RequiresTopologies = true
			}
		}
	}

	fp.Healthy, fp.HealthDescription, err = probe(ctx, c)
	if err != nil {
		return nil, err
	}

	if askController {
		ccaps, err := c.controller.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
		switch {
		case status.Code(err) == codes.Unimplemented:
		case err != nil:
			return nil, rpcErr("ControllerGetCapabilities", err)
		default:
			fp.HasController = true
			fp.ControllerCaps = controllerCaps(ccaps.GetCapabilities())
		}
	}

	ninfo, err := c.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
	case err != nil:
		return nil, rpcErr("NodeGetInfo", err)
	default:
		fp.HasNode = true
		fp.NodeID = ninfo.GetNodeId()
		fp.MaxVolumes = ninfo.GetMaxVolumesPerNode()
		fp.AccessibleTopology = ninfo.GetAccessibleTopology().GetSegments()
		ncaps, err := c.node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
		switch {
		case status.Code(err) == codes.Unimplemented:
		case err != nil:
			return nil, rpcErr("NodeGetCapabilities", err)
		default:
			fp.NodeCaps = nodeCaps(ncaps.GetCapabilities())
		}
	}

	switch {
	case !fp.Healthy:
	case !fp.HasController && !fp.HasNode:
		fp.Healthy, fp.HealthDescription = false, "the driver serves neither the controller nor the node service"
	case fp.HasNode && fp.NodeID == "":
		fp.Healthy, fp.HealthDescription = false, "NodeGetInfo gave no node ID"
	}
	return fp, nil
}

// probe asks the driver whether it is ready. A driver that answers Probe
// with an error, or with ready = false, is unhealthy, which is not an
// error of the fingerprint; only the end of ctx is.
func probe(ctx context.Context, c clients) (healthy bool, desc string, err error) {
	resp, err := c.identity.Probe(ctx, &csi.ProbeRequest{})
	if err != nil {
		if ctx.Err() != nil {
			return false, "", rpcErr("Probe", err)
		}
		st := status.Convert(err)
		msg := st.Message()
		if len(msg) > maxDriverMessage {
			msg = msg[:maxDriverMessage] + "..."
		}
		return false, fmt.Sprintf("probe failed: %s: %s", st.Code(), msg), nil
	}
	// An unset ready flag means ready, as the spec allows.
	if r := resp.GetReady(); r != nil && !r.GetValue() {
		return false, "probe: the driver is not ready", nil
	}
	return true, "healthy", nil
}

// rpcErr names the CSI RPC of one step of a multi-RPC call; call maps the
// code once the whole call is done.
func rpcErr(rpc string, err error) error {
	st := status.Convert(err)
	return status.Error(st.Code(), rpc+": "+st.Message())
}

func controllerCaps(caps []*csi.ControllerServiceCapability) csibridge.ControllerCaps {
	var out csibridge.ControllerCaps
	for _, c := range caps {
		switch c.GetRpc().GetType() {
		case csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:
			out.CreateDelete = true
		case csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:
			out.PublishUnpublish = true
		case csi.ControllerServiceCapability_RPC_LIST_VOLUMES:
			out.ListVolumes = true
		case csi.ControllerServiceCapability_RPC_GET_CAPACITY:
			out.GetCapacity = true
		case csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT:
			out.CreateDeleteSnapshot = true
		case csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS:
			out.ListSnapshots = true
		case csi.ControllerServiceCapability_RPC_CLONE_VOLUME:
			out.Clone = true
		case csi.ControllerServiceCapability_RPC_PUBLISH_READONLY:
			out.ReadOnly = true
		case csi.ControllerServiceCapability_RPC_EXPAND_VOLUME:
			out.Expand = true
		case csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES:
			out.ListVolumesPublishedNodes = true
		case csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH,
			csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH:
			out.VolumeCondition = true
		case csi.ControllerServiceCapability_RPC_GET_VOLUME:
			out.GetVolume = true
		case csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			out.SingleNodeMultiWriter = true
		case csi.ControllerServiceCapability_RPC_MODIFY_VOLUME:
			out.ModifyVolume = true
		}
	}
	return out
}

func nodeCaps(caps []*csi.NodeServiceCapability) csibridge.NodeCaps {
	var out csibridge.NodeCaps
	for _, c := range caps {
		switch c.GetRpc().GetType() {
		case csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			out.StageUnstage = true
		case csi.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			out.GetVolumeStats = true
		case csi.NodeServiceCapability_RPC_EXPAND_VOLUME:
			out.Expand = true
		case csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH:
			out.VolumeCondition = true
		case csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			out.SingleNodeMultiWriter = true
		case csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			out.VolumeMountGroup = true
		}
	}
	return out
}

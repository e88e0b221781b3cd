package bridge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/drover-org/drover/sdk/csibridge"
)

// ControllerPublish implements csibridge.Bridge (ControllerPublishVolume).
func (b *Bridge) ControllerPublish(ctx context.Context, req csibridge.ControllerPublishRequest) (map[string]string, error) {
	if req.VolumeID == "" || req.NodeID == "" {
		return nil, invalid("ControllerPublish needs a volume ID and a node ID")
	}
	vc, err := volumeCapability(req.Capability)
	if err != nil {
		return nil, err
	}
	var pc map[string]string
	err = b.call(ctx, "ControllerPublishVolume", req.Socket, req.VolumeID, func(ctx context.Context, c clients) error {
		resp, err := c.controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
			VolumeId: req.VolumeID, NodeId: req.NodeID, VolumeCapability: vc,
			Readonly: req.ReadOnly, Secrets: req.Secrets, VolumeContext: req.VolumeContext,
		})
		pc = resp.GetPublishContext()
		return err
	})
	if err != nil {
		return nil, err
	}
	return pc, nil
}

// ControllerUnpublish implements csibridge.Bridge
// (ControllerUnpublishVolume). An empty NodeID asks the driver to detach
// the volume from every node, as the spec allows.
func (b *Bridge) ControllerUnpublish(ctx context.Context, req csibridge.ControllerUnpublishRequest) error {
	if req.VolumeID == "" {
		return invalid("ControllerUnpublish needs a volume ID")
	}
	return b.call(ctx, "ControllerUnpublishVolume", req.Socket, req.VolumeID, func(ctx context.Context, c clients) error {
		_, err := c.controller.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{
			VolumeId: req.VolumeID, NodeId: req.NodeID, Secrets: req.Secrets,
		})
		return err
	})
}

// NodeStage implements csibridge.Bridge (NodeStageVolume).
func (b *Bridge) NodeStage(ctx context.Context, req csibridge.NodeStageRequest) error {
	if req.VolumeID == "" || req.StagingPath == "" {
		return invalid("NodeStage needs a volume ID and a staging path")
	}
	vc, err := volumeCapability(req.Capability)
	if err != nil {
		return err
	}
	return b.call(ctx, "NodeStageVolume", req.Socket, req.VolumeID, func(ctx context.Context, c clients) error {
		_, err := c.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
			VolumeId: req.VolumeID, PublishContext: req.PublishContext,
			StagingTargetPath: req.StagingPath, VolumeCapability: vc,
			Secrets: req.Secrets, VolumeContext: req.VolumeContext,
		})
		return err
	})
}

// NodeUnstage implements csibridge.Bridge (NodeUnstageVolume).
func (b *Bridge) NodeUnstage(ctx context.Context, req csibridge.NodeUnstageRequest) error {
	if req.VolumeID == "" || req.StagingPath == "" {
		return invalid("NodeUnstage needs a volume ID and a staging path")
	}
	return b.call(ctx, "NodeUnstageVolume", req.Socket, req.VolumeID, func(ctx context.Context, c clients) error {
		_, err := c.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{
			VolumeId: req.VolumeID, StagingTargetPath: req.StagingPath,
		})
		return err
	})
}

// NodePublish implements csibridge.Bridge (NodePublishVolume).
func (b *Bridge) NodePublish(ctx context.Context, req csibridge.NodePublishRequest) error {
	if req.VolumeID == "" || req.TargetPath == "" {
		return invalid("NodePublish needs a volume ID and a target path")
	}
	vc, err := volumeCapability(req.Capability)
	if err != nil {
		return err
	}
	return b.call(ctx, "NodePublishVolume", req.Socket, req.VolumeID, func(ctx context.Context, c clients) error {
		_, err := c.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId: req.VolumeID, PublishContext: req.PublishContext,
			StagingTargetPath: req.StagingPath, TargetPath: req.TargetPath,
			VolumeCapability: vc, Readonly: req.ReadOnly,
			Secrets: req.Secrets, VolumeContext: req.VolumeContext,
		})
		return err
	})
}

// NodeUnpublish implements csibridge.Bridge (NodeUnpublishVolume).
func (b *Bridge) NodeUnpublish(ctx context.Context, req csibridge.NodeUnpublishRequest) error {
	if req.VolumeID == "" || req.TargetPath == "" {
		return invalid("NodeUnpublish needs a volume ID and a target path")
	}
	return b.call(ctx, "NodeUnpublishVolume", req.Socket, req.VolumeID, func(ctx context.Context, c clients) error {
		_, err := c.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{
			VolumeId: req.VolumeID, TargetPath: req.TargetPath,
		})
		return err
	})
}

// CreateVolume implements csibridge.Bridge (CreateVolume).
func (b *Bridge) CreateVolume(ctx context.Context, req csibridge.CreateVolumeRequest) (*csibridge.CreatedVolume, error) {
	if req.Name == "" {
		return nil, invalid("CreateVolume needs a name")
	}
	if len(req.Capabilities) == 0 {
		return nil, invalid("CreateVolume needs at least one capability")
	}
	in := &csi.CreateVolumeRequest{Name: req.Name, Parameters: req.Parameters, Secrets: req.Secrets}
	for _, c := range req.Capabilities {
		vc, err := volumeCapability(c)
		if err != nil {
			return nil, err
		}
		in.VolumeCapabilities = append(in.VolumeCapabilities, vc)
	}
	if req.CapacityMin > 0 || req.CapacityMax > 0 {
		in.CapacityRange = &csi.CapacityRange{RequiredBytes: req.CapacityMin, LimitBytes: req.CapacityMax}
	}
	if cs := req.ContentSource; cs != nil {
		switch {
		case cs.SnapshotID != "" && cs.VolumeID == "":
			in.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
				Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: cs.SnapshotID}}}
		case cs.VolumeID != "" && cs.SnapshotID == "":
			in.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
				Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: cs.VolumeID}}}
		default:
			return nil, invalid("a content source names exactly one of a snapshot and a volume")
		}
	}
	if len(req.TopologyRequired) > 0 || len(req.TopologyPreferred) > 0 {
		in.AccessibilityRequirements = &csi.TopologyRequirement{
			Requisite: topologiesToCSI(req.TopologyRequired),
			Preferred: topologiesToCSI(req.TopologyPreferred),
		}
	}
	var out *csibridge.CreatedVolume
	err := b.call(ctx, "CreateVolume", req.Socket, req.Name, func(ctx context.Context, c clients) error {
		resp, err := c.controller.CreateVolume(ctx, in)
		if err != nil {
			return err
		}
		v := resp.GetVolume()
		if v.GetVolumeId() == "" {
			return invalidDriverReply("CreateVolume returned no volume ID")
		}
		out = &csibridge.CreatedVolume{
			ExternalID:    v.GetVolumeId(),
			CapacityBytes: v.GetCapacityBytes(),
			Context:       v.GetVolumeContext(),
			Topologies:    topologiesFromCSI(v.GetAccessibleTopology()),
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteVolume implements csibridge.Bridge (DeleteVolume).
func (b *Bridge) DeleteVolume(ctx context.Context, req csibridge.DeleteVolumeRequest) error {
	if req.ExternalID == "" {
		return invalid("DeleteVolume needs an external volume ID")
	}
	return b.call(ctx, "DeleteVolume", req.Socket, req.ExternalID, func(ctx context.Context, c clients) error {
		_, err := c.controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{
			VolumeId: req.ExternalID, Secrets: req.Secrets,
		})
		return err
	})
}

// ValidateVolumeCapabilities implements csibridge.Bridge
// (ValidateVolumeCapabilities). By the spec, an answer without confirmed
// means the driver does not support the capabilities: that is a
// Validation with Confirmed false and a message naming the capabilities
// asked about and the driver's reason. A confirmation that lists
// capabilities must list every one asked about (by access mode and access
// type); a confirmation that lists none confirms the request as sent.
func (b *Bridge) ValidateVolumeCapabilities(ctx context.Context, req csibridge.ValidateVolumeCapabilitiesRequest) (*csibridge.Validation, error) {
	if req.VolumeID == "" {
		return nil, invalid("ValidateVolumeCapabilities needs a volume ID")
	}
	if len(req.Capabilities) == 0 {
		return nil, invalid("ValidateVolumeCapabilities needs at least one capability")
	}
	in := &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: req.VolumeID, VolumeContext: req.VolumeContext,
		Parameters: req.Parameters, Secrets: req.Secrets,
	}
	for _, c := range req.Capabilities {
		vc, err := volumeCapability(c)
		if err != nil {
			return nil, err
		}
		in.VolumeCapabilities = append(in.VolumeCapabilities, vc)
	}
	var out *csibridge.Validation
	err := b.call(ctx, "ValidateVolumeCapabilities", req.Socket, req.VolumeID, func(ctx context.Context, c clients) error {
		resp, err := c.controller.ValidateVolumeCapabilities(ctx, in)
		if err != nil {
			return err
		}
		out = validation(req.Capabilities, in.VolumeCapabilities, resp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// validation reads a driver's answer to ValidateVolumeCapabilities for
// the capabilities asked (caps, and as sent, sent).
func validation(caps []csibridge.Capability, sent []*csi.VolumeCapability, resp *csi.ValidateVolumeCapabilitiesResponse) *csibridge.Validation {
	msg := driverMessage(resp.GetMessage())
	conf := resp.GetConfirmed()
	if conf == nil {
		if msg == "" {
			msg = "the driver gave no reason"
		}
		return &csibridge.Validation{Message: fmt.Sprintf("capabilities not confirmed (%s): %s", capabilityList(caps), msg)}
	}
	if got := conf.GetVolumeCapabilities(); len(got) > 0 {
		var missing []csibridge.Capability
		for i, vc := range sent {
			if !slices.ContainsFunc(got, func(g *csi.VolumeCapability) bool { return sameCapability(g, vc) }) {
				missing = append(missing, caps[i])
			}
		}
		if len(missing) > 0 {
			m := fmt.Sprintf("the driver's confirmation leaves out %s", capabilityList(missing))
			if msg != "" {
				m += ": " + msg
			}
			return &csibridge.Validation{Message: m}
		}
	}
	return &csibridge.Validation{Confirmed: true, Message: msg}
}

// sameCapability compares what a confirmation must keep of a capability:
// its access mode and access type. File system types and mount flags are
// the driver's to normalise.
func sameCapability(a, b *csi.VolumeCapability) bool {
	return a.GetAccessMode().GetMode() == b.GetAccessMode().GetMode() &&
		(a.GetBlock() != nil) == (b.GetBlock() != nil) && (a.GetMount() != nil) == (b.GetMount() != nil)
}

// capabilityList names capabilities as access/attachment mode pairs, with
// the file system type when set; never the mount flags, which may be
// sensitive.
func capabilityList(caps []csibridge.Capability) string {
	parts := make([]string, 0, len(caps))
	for _, c := range caps {
		s := c.AccessMode + "/" + c.AttachmentMode
		if c.FSType != "" {
			s += " (" + c.FSType + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

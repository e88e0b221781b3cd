package csibridge

import pb "github.com/drover-org/drover/sdk/proto/csibridgepb"

// Conversions between this package's types and the wire messages. A nil
// result from the implementation becomes an empty message, never a panic.

func capabilityToPB(c Capability) *pb.Capability {
	return &pb.Capability{
		AccessMode: c.AccessMode, AttachmentMode: c.AttachmentMode,
		FsType: c.FSType, MountFlags: c.MountFlags,
	}
}

func capabilityFromPB(c *pb.Capability) Capability {
	return Capability{
		AccessMode: c.GetAccessMode(), AttachmentMode: c.GetAttachmentMode(),
		FSType: c.GetFsType(), MountFlags: c.GetMountFlags(),
	}
}

func topologiesToPB(ts []map[string]string) []*pb.Topology {
	if ts == nil {
		return nil
	}
	out := make([]*pb.Topology, len(ts))
	for i, t := range ts {
		out[i] = &pb.Topology{Segments: t}
	}
	return out
}

func topologiesFromPB(ts []*pb.Topology) []map[string]string {
	if ts == nil {
		return nil
	}
	out := make([]map[string]string, len(ts))
	for i, t := range ts {
		out[i] = t.GetSegments()
	}
	return out
}

func fingerprintToPB(f *Fingerprint) *pb.FingerprintResponse {
	if f == nil {
		return &pb.FingerprintResponse{}
	}
	cc, nc := f.ControllerCaps, f.NodeCaps
	return &pb.FingerprintResponse{
		PluginName:        f.PluginName,
		Version:           f.Version,
		Healthy:           f.Healthy,
		HealthDescription: f.HealthDescription,
		HasController:     f.HasController,
		HasNode:           f.HasNode,
		ControllerCaps: &pb.ControllerCaps{
			CreateDelete:              cc.CreateDelete,
			PublishUnpublish:          cc.PublishUnpublish,
			ListVolumes:               cc.ListVolumes,
			GetCapacity:               cc.GetCapacity,
			CreateDeleteSnapshot:      cc.CreateDeleteSnapshot,
			ListSnapshots:             cc.ListSnapshots,
			Clone:                     cc.Clone,
			ReadOnly:                  cc.ReadOnly,
			Expand:                    cc.Expand,
			ListVolumesPublishedNodes: cc.ListVolumesPublishedNodes,
			VolumeCondition:           cc.VolumeCondition,
			GetVolume:                 cc.GetVolume,
			SingleNodeMultiWriter:     cc.SingleNodeMultiWriter,
			ModifyVolume:              cc.ModifyVolume,
		},
		NodeCaps: &pb.NodeCaps{
			StageUnstage:          nc.StageUnstage,
			GetVolumeStats:        nc.GetVolumeStats,
			Expand:                nc.Expand,
			VolumeCondition:       nc.VolumeCondition,
			SingleNodeMultiWriter: nc.SingleNodeMultiWriter,
			VolumeMountGroup:      nc.VolumeMountGroup,
		},
		NodeId:             f.NodeID,
		MaxVolumes:         f.MaxVolumes,
		AccessibleTopology: f.AccessibleTopology,
		RequiresTopologies: f.RequiresTopologies,
	}
}

func fingerprintFromPB(r *pb.FingerprintResponse) *Fingerprint {
	cc, nc := r.GetControllerCaps(), r.GetNodeCaps()
	return &Fingerprint{
		PluginName:        r.GetPluginName(),
		Version:           r.GetVersion(),
		Healthy:           r.GetHealthy(),
		HealthDescription: r.GetHealthDescription(),
		HasController:     r.GetHasController(),
		HasNode:           r.GetHasNode(),
		ControllerCaps: ControllerCaps{
			CreateDelete:              cc.GetCreateDelete(),
			PublishUnpublish:          cc.GetPublishUnpublish(),
			ListVolumes:               cc.GetListVolumes(),
			GetCapacity:               cc.GetGetCapacity(),
			CreateDeleteSnapshot:      cc.GetCreateDeleteSnapshot(),
			ListSnapshots:             cc.GetListSnapshots(),
			Clone:                     cc.GetClone(),
			ReadOnly:                  cc.GetReadOnly(),
			Expand:                    cc.GetExpand(),
			ListVolumesPublishedNodes: cc.GetListVolumesPublishedNodes(),
			VolumeCondition:           cc.GetVolumeCondition(),
			GetVolume:                 cc.GetGetVolume(),
			SingleNodeMultiWriter:     cc.GetSingleNodeMultiWriter(),
			ModifyVolume:              cc.GetModifyVolume(),
		},
		NodeCaps: NodeCaps{
			StageUnstage:          nc.GetStageUnstage(),
			GetVolumeStats:        nc.GetGetVolumeStats(),
			Expand:                nc.GetExpand(),
			VolumeCondition:       nc.GetVolumeCondition(),
			SingleNodeMultiWriter: nc.GetSingleNodeMultiWriter(),
			VolumeMountGroup:      nc.GetVolumeMountGroup(),
		},
		NodeID:             r.GetNodeId(),
		MaxVolumes:         r.GetMaxVolumes(),
		AccessibleTopology: r.GetAccessibleTopology(),
		RequiresTopologies: r.GetRequiresTopologies(),
	}
}

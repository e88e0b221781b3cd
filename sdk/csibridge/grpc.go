package csibridge

import (
	"context"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/sdk/base"
	pb "github.com/drover-org/drover/sdk/proto/csibridgepb"
)

// Plugin is the go-plugin glue of the csi-bridge kind. A plugin binary
// serves it with Impl set (see Serve); the host registers it with Impl nil
// under shared.KindCSIBridge and gets a Bridge from Dispense.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Bridge
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the implementation with the plugin's gRPC server,
// and the Base service when it is base.Configurable.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if err := base.Register(s, p.Impl); err != nil {
		return err
	}
	pb.RegisterCSIBridgeServer(s, &grpcServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Bridge that calls the plugin over conn.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (interface{}, error) {
	return NewClient(conn), nil
}

// NewClient returns a Bridge that calls a bridge plugin served on conn.
func NewClient(conn grpc.ClientConnInterface) Bridge {
	return &grpcClient{client: pb.NewCSIBridgeClient(conn)}
}

// Ping proves that b, a Bridge dispensed from a plugin, really is served
// by the plugin: it fails with gRPC code Unimplemented when the plugin
// does not serve the csi-bridge kind, which is what the agent's plugin
// discovery needs. For a Bridge that is not a plugin client it is a no-op.
func Ping(ctx context.Context, b Bridge) error {
	c, ok := b.(*grpcClient)
	if !ok {
		return nil
	}
	_, err := c.client.Ping(ctx, &pb.PingRequest{})
	return fromStatus(err)
}

// grpcClient adapts the generated client to Bridge.
type grpcClient struct {
	client pb.CSIBridgeClient
}

var _ Bridge = (*grpcClient)(nil)

func (c *grpcClient) Fingerprint(ctx context.Context, req FingerprintRequest) (*Fingerprint, error) {
	resp, err := c.client.Fingerprint(ctx, &pb.FingerprintRequest{Socket: req.Socket})
	if err != nil {
		return nil, fromStatus(err)
	}
	return fingerprintFromPB(resp), nil
}

func (c *grpcClient) ControllerPublish(ctx context.Context, req ControllerPublishRequest) (map[string]string, error) {
	resp, err := c.client.ControllerPublish(ctx, &pb.ControllerPublishRequest{
		Socket: req.Socket, VolumeId: req.VolumeID, NodeId: req.NodeID,
		Capability: capabilityToPB(req.Capability), ReadOnly: req.ReadOnly,
		Secrets: req.Secrets, VolumeContext: req.VolumeContext,
	})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetPublishContext(), nil
}

func (c *grpcClient) ControllerUnpublish(ctx context.Context, req ControllerUnpublishRequest) error {
	_, err := c.client.ControllerUnpublish(ctx, &pb.ControllerUnpublishRequest{
		Socket: req.Socket, VolumeId: req.VolumeID, NodeId: req.NodeID, Secrets: req.Secrets,
	})
	return fromStatus(err)
}

func (c *grpcClient) NodeStage(ctx context.Context, req NodeStageRequest) error {
	_, err := c.client.NodeStage(ctx, &pb.NodeStageRequest{
		Socket: req.Socket, VolumeId: req.VolumeID, PublishContext: req.PublishContext,
		StagingPath: req.StagingPath, Capability: capabilityToPB(req.Capability),
		Secrets: req.Secrets, VolumeContext: req.VolumeContext,
	})
	return fromStatus(err)
}

func (c *grpcClient) NodeUnstage(ctx context.Context, req NodeUnstageRequest) error {
	_, err := c.client.NodeUnstage(ctx, &pb.NodeUnstageRequest{
		Socket: req.Socket, VolumeId: req.VolumeID, StagingPath: req.StagingPath,
	})
	return fromStatus(err)
}

func (c *grpcClient) NodePublish(ctx context.Context, req NodePublishRequest) error {
	_, err := c.client.NodePublish(ctx, &pb.NodePublishRequest{
		Socket: req.Socket, VolumeId: req.VolumeID, PublishContext: req.PublishContext,
		StagingPath: req.StagingPath, TargetPath: req.TargetPath,
		Capability: capabilityToPB(req.Capability), ReadOnly: req.ReadOnly,
		Secrets: req.Secrets, VolumeContext: req.VolumeContext,
	})
	return fromStatus(err)
}

func (c *grpcClient) NodeUnpublish(ctx context.Context, req NodeUnpublishRequest) error {
	_, err := c.client.NodeUnpublish(ctx, &pb.NodeUnpublishRequest{
		Socket: req.Socket, VolumeId: req.VolumeID, TargetPath: req.TargetPath,
	})
	return fromStatus(err)
}

func (c *grpcClient) CreateVolume(ctx context.Context, req CreateVolumeRequest) (*CreatedVolume, error) {
	caps := make([]*pb.Capability, len(req.Capabilities))
	for i, cp := range req.Capabilities {
		caps[i] = capabilityToPB(cp)
	}
	var src *pb.ContentSource
	if cs := req.ContentSource; cs != nil {
		src = &pb.ContentSource{SnapshotId: cs.SnapshotID, VolumeId: cs.VolumeID}
	}
	resp, err := c.client.CreateVolume(ctx, &pb.CreateVolumeRequest{
		Socket: req.Socket, Name: req.Name,
		CapacityMin: req.CapacityMin, CapacityMax: req.CapacityMax,
		Capabilities: caps, Parameters: req.Parameters, Secrets: req.Secrets,
		ContentSource:     src,
		TopologyRequired:  topologiesToPB(req.TopologyRequired),
		TopologyPreferred: topologiesToPB(req.TopologyPreferred),
	})
	if err != nil {
		return nil, fromStatus(err)
	}
	return &CreatedVolume{
		ExternalID:    resp.GetExternalId(),
		CapacityBytes: resp.GetCapacityBytes(),
		Context:       resp.GetContext(),
		Topologies:    topologiesFromPB(resp.GetTopologies()),
	}, nil
}

func (c *grpcClient) DeleteVolume(ctx context.Context, req DeleteVolumeRequest) error {
	_, err := c.client.DeleteVolume(ctx, &pb.DeleteVolumeRequest{
		Socket: req.Socket, ExternalId: req.ExternalID, Secrets: req.Secrets,
	})
	return fromStatus(err)
}

func (c *grpcClient) ValidateVolumeCapabilities(ctx context.Context, req ValidateVolumeCapabilitiesRequest) (*Validation, error) {
	caps := make([]*pb.Capability, len(req.Capabilities))
	for i, cp := range req.Capabilities {
		caps[i] = capabilityToPB(cp)
	}
	resp, err := c.client.ValidateVolumeCapabilities(ctx, &pb.ValidateVolumeCapabilitiesRequest{
		Socket: req.Socket, VolumeId: req.VolumeID, Capabilities: caps,
		Parameters: req.Parameters, VolumeContext: req.VolumeContext, Secrets: req.Secrets,
	})
	if err != nil {
		return nil, fromStatus(err)
	}
	return &Validation{Confirmed: resp.GetConfirmed(), Message: boundMessage(resp.GetMessage())}, nil
}

// grpcServer adapts a Bridge to the generated server interface. It bounds
// every request (limits.go) before the implementation sees it.
type grpcServer struct {
	pb.UnimplementedCSIBridgeServer
	impl Bridge
}

func (s *grpcServer) Ping(context.Context, *pb.PingRequest) (*pb.PingResponse, error) {
	return &pb.PingResponse{}, nil
}

func (s *grpcServer) Fingerprint(ctx context.Context, in *pb.FingerprintRequest) (*pb.FingerprintResponse, error) {
	req := FingerprintRequest{Socket: in.GetSocket()}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	fp, err := s.impl.Fingerprint(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return fingerprintToPB(fp), nil
}

func (s *grpcServer) ControllerPublish(ctx context.Context, in *pb.ControllerPublishRequest) (*pb.ControllerPublishResponse, error) {
	req := ControllerPublishRequest{
		Socket: in.GetSocket(), VolumeID: in.GetVolumeId(), NodeID: in.GetNodeId(),
		Capability: capabilityFromPB(in.GetCapability()), ReadOnly: in.GetReadOnly(),
		Secrets: in.GetSecrets(), VolumeContext: in.GetVolumeContext(),
	}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	pc, err := s.impl.ControllerPublish(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ControllerPublishResponse{PublishContext: pc}, nil
}

func (s *grpcServer) ControllerUnpublish(ctx context.Context, in *pb.ControllerUnpublishRequest) (*pb.ControllerUnpublishResponse, error) {
	req := ControllerUnpublishRequest{
		Socket: in.GetSocket(), VolumeID: in.GetVolumeId(), NodeID: in.GetNodeId(), Secrets: in.GetSecrets(),
	}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.ControllerUnpublish(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &pb.ControllerUnpublishResponse{}, nil
}

func (s *grpcServer) NodeStage(ctx context.Context, in *pb.NodeStageRequest) (*pb.NodeStageResponse, error) {
	req := NodeStageRequest{
		Socket: in.GetSocket(), VolumeID: in.GetVolumeId(), PublishContext: in.GetPublishContext(),
		StagingPath: in.GetStagingPath(), Capability: capabilityFromPB(in.GetCapability()),
		Secrets: in.GetSecrets(), VolumeContext: in.GetVolumeContext(),
	}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.NodeStage(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &pb.NodeStageResponse{}, nil
}

func (s *grpcServer) NodeUnstage(ctx context.Context, in *pb.NodeUnstageRequest) (*pb.NodeUnstageResponse, error) {
	req := NodeUnstageRequest{Socket: in.GetSocket(), VolumeID: in.GetVolumeId(), StagingPath: in.GetStagingPath()}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.NodeUnstage(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &pb.NodeUnstageResponse{}, nil
}

func (s *grpcServer) NodePublish(ctx context.Context, in *pb.NodePublishRequest) (*pb.NodePublishResponse, error) {
	req := NodePublishRequest{
		Socket: in.GetSocket(), VolumeID: in.GetVolumeId(), PublishContext: in.GetPublishContext(),
		StagingPath: in.GetStagingPath(), TargetPath: in.GetTargetPath(),
		Capability: capabilityFromPB(in.GetCapability()), ReadOnly: in.GetReadOnly(),
		Secrets: in.GetSecrets(), VolumeContext: in.GetVolumeContext(),
	}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.NodePublish(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &pb.NodePublishResponse{}, nil
}

func (s *grpcServer) NodeUnpublish(ctx context.Context, in *pb.NodeUnpublishRequest) (*pb.NodeUnpublishResponse, error) {
	req := NodeUnpublishRequest{Socket: in.GetSocket(), VolumeID: in.GetVolumeId(), TargetPath: in.GetTargetPath()}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.NodeUnpublish(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &pb.NodeUnpublishResponse{}, nil
}

func (s *grpcServer) CreateVolume(ctx context.Context, in *pb.CreateVolumeRequest) (*pb.CreateVolumeResponse, error) {
	// Bound the list before converting it, so a huge request costs
	// nothing to refuse.
	var l limiter
	l.list("capabilities", len(in.GetCapabilities()))
	l.list("required topologies", len(in.GetTopologyRequired()))
	l.list("preferred topologies", len(in.GetTopologyPreferred()))
	if l.err != nil {
		return nil, toStatus(l.err)
	}
	req := CreateVolumeRequest{
		Socket: in.GetSocket(), Name: in.GetName(),
		CapacityMin: in.GetCapacityMin(), CapacityMax: in.GetCapacityMax(),
		Parameters: in.GetParameters(), Secrets: in.GetSecrets(),
		TopologyRequired:  topologiesFromPB(in.GetTopologyRequired()),
		TopologyPreferred: topologiesFromPB(in.GetTopologyPreferred()),
	}
	for _, c := range in.GetCapabilities() {
		req.Capabilities = append(req.Capabilities, capabilityFromPB(c))
	}
	if cs := in.GetContentSource(); cs != nil {
		req.ContentSource = &ContentSource{SnapshotID: cs.GetSnapshotId(), VolumeID: cs.GetVolumeId()}
	}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	v, err := s.impl.CreateVolume(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	if v == nil {
		return &pb.CreateVolumeResponse{}, nil
	}
	return &pb.CreateVolumeResponse{
		ExternalId:    v.ExternalID,
		CapacityBytes: v.CapacityBytes,
		Context:       v.Context,
		Topologies:    topologiesToPB(v.Topologies),
	}, nil
}

func (s *grpcServer) DeleteVolume(ctx context.Context, in *pb.DeleteVolumeRequest) (*pb.DeleteVolumeResponse, error) {
	req := DeleteVolumeRequest{Socket: in.GetSocket(), ExternalID: in.GetExternalId(), Secrets: in.GetSecrets()}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.DeleteVolume(ctx, req); err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteVolumeResponse{}, nil
}

func (s *grpcServer) ValidateVolumeCapabilities(ctx context.Context, in *pb.ValidateVolumeCapabilitiesRequest) (*pb.ValidateVolumeCapabilitiesResponse, error) {
	var l limiter
	l.list("capabilities", len(in.GetCapabilities()))
	if l.err != nil {
		return nil, toStatus(l.err)
	}
	req := ValidateVolumeCapabilitiesRequest{
		Socket: in.GetSocket(), VolumeID: in.GetVolumeId(),
		Parameters: in.GetParameters(), VolumeContext: in.GetVolumeContext(), Secrets: in.GetSecrets(),
	}
	for _, c := range in.GetCapabilities() {
		req.Capabilities = append(req.Capabilities, capabilityFromPB(c))
	}
	if err := req.check(); err != nil {
		return nil, toStatus(err)
	}
	v, err := s.impl.ValidateVolumeCapabilities(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	if v == nil {
		return &pb.ValidateVolumeCapabilitiesResponse{}, nil
	}
	return &pb.ValidateVolumeCapabilitiesResponse{Confirmed: v.Confirmed, Message: boundMessage(v.Message)}, nil
}

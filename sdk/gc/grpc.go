package gc

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// Plugin carries a Collector over go-plugin's gRPC transport. On the plugin
// side Impl is the implementation being served; on the host side Impl is
// unused and Dispense returns a Collector that calls the plugin process.
type Plugin struct {
	// drover speaks gRPC only; the net/rpc half of plugin.Plugin refuses.
	plugin.NetRPCUnsupportedPlugin

	Impl Collector
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers Impl as the GC gRPC service, and the Base service
// when Impl is base.Configurable.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("gc: Plugin.Impl is nil")
	}
	if err := base.Register(s, p.Impl); err != nil {
		return err
	}
	gcpb.RegisterGCServer(s, &grpcServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Collector backed by the plugin's gRPC connection.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return NewGRPCClient(conn), nil
}

// NewGRPCClient returns a Collector that calls the GC service over conn.
// It passes requests and responses through as they are: the host checks
// them (ValidateRequest before it sends a page, ValidateResponse on the
// answer, as drover's core does for every collector, in process or not),
// once. Errors are the plugin's gRPC status errors (codes.Unavailable for
// a dead plugin; an SDK plugin's adapter refuses a page outside the bounds
// with codes.InvalidArgument and its own response below the floor with
// codes.Internal).
func NewGRPCClient(conn grpc.ClientConnInterface) Collector {
	return &grpcClient{client: gcpb.NewGCClient(conn)}
}

// grpcClient is the host-side stub: Collector → gRPC.
type grpcClient struct {
	client gcpb.GCClient
}

func (c *grpcClient) Info(ctx context.Context) (*gcpb.InfoResponse, error) {
	return c.client.Info(ctx, &gcpb.InfoRequest{})
}

func (c *grpcClient) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	return c.client.Decide(ctx, req)
}

// grpcServer is the plugin-side adapter: gRPC → Collector. It refuses a
// request outside the bounds before the implementation sees it, and checks
// the implementation's response before sending it, so a plugin's bug shows
// up in the plugin's own error rather than as a refusal on the host.
type grpcServer struct {
	gcpb.UnimplementedGCServer
	impl Collector
}

func (s *grpcServer) Info(ctx context.Context, _ *gcpb.InfoRequest) (*gcpb.InfoResponse, error) {
	resp, err := s.impl.Info(ctx)
	if err == nil && resp == nil {
		return nil, status.Error(codes.Internal, "gc plugin returned a nil InfoResponse")
	}
	return resp, err
}

func (s *grpcServer) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	page, err := ValidateRequest(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	resp, err := s.impl.Decide(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, status.Error(codes.Internal, "gc plugin returned a nil DecideResponse")
	}
	if err := ValidateResponse(page, resp); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return resp, nil
}

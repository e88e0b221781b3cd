package scheduler

import (
	"context"
	"errors"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Plugin carries a Scheduler over go-plugin's gRPC transport. On the plugin
// side Impl is the implementation being served; on the host side Impl is
// unused and Dispense returns a Scheduler that calls the plugin process.
type Plugin struct {
	// drover speaks gRPC only; the net/rpc half of plugin.Plugin refuses.
	plugin.NetRPCUnsupportedPlugin

	Impl Scheduler
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers Impl as the Scheduler gRPC service, and the Base
// service when Impl is base.Configurable.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Impl == nil {
		return errors.New("scheduler: Plugin.Impl is nil")
	}
	if err := base.Register(s, p.Impl); err != nil {
		return err
	}
	schedulerpb.RegisterSchedulerServer(s, &grpcServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Scheduler backed by the plugin's gRPC connection.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return NewGRPCClient(conn), nil
}

// NewGRPCClient returns a Scheduler that calls the Scheduler service over
// conn. Errors are gRPC status errors, so a caller can tell a dead plugin
// (codes.Unavailable) from a refused request.
func NewGRPCClient(conn grpc.ClientConnInterface) Scheduler {
	return &grpcClient{client: schedulerpb.NewSchedulerClient(conn)}
}

// grpcClient is the host-side stub: Scheduler → gRPC.
type grpcClient struct {
	client schedulerpb.SchedulerClient
}

func (c *grpcClient) Info(ctx context.Context) (*schedulerpb.InfoResponse, error) {
	return c.client.Info(ctx, &schedulerpb.InfoRequest{})
}

func (c *grpcClient) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	return c.client.Schedule(ctx, req)
}

// grpcServer is the plugin-side adapter: gRPC → Scheduler.
type grpcServer struct {
	schedulerpb.UnimplementedSchedulerServer
	impl Scheduler
}

func (s *grpcServer) Info(ctx context.Context, _ *schedulerpb.InfoRequest) (*schedulerpb.InfoResponse, error) {
	resp, err := s.impl.Info(ctx)
	if err == nil && resp == nil {
		// gRPC cannot marshal a nil message; name the contract breach
		// instead of failing with a marshalling error.
		return nil, status.Error(codes.Internal, "scheduler plugin returned a nil InfoResponse")
	}
	return resp, err
}

func (s *grpcServer) Schedule(ctx context.Context, req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	resp, err := s.impl.Schedule(ctx, req)
	if err == nil && resp == nil {
		return nil, status.Error(codes.Internal, "scheduler plugin returned a nil ScheduleResponse")
	}
	return resp, err
}

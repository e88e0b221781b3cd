package driver

import (
	"context"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// Plugin is the go-plugin glue of the driver kind. A plugin binary serves
// it with Impl set (see Serve); the host registers it with Impl nil under
// shared.KindDriver and gets a Driver from Dispense.
type Plugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl Driver
}

var _ plugin.GRPCPlugin = (*Plugin)(nil)

// GRPCServer registers the implementation with the plugin's gRPC server,
// and the Base service when it is base.Configurable.
func (p *Plugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if err := base.Register(s, p.Impl); err != nil {
		return err
	}
	driverpb.RegisterDriverServer(s, &grpcServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Driver that calls the plugin over conn.
func (p *Plugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, conn *grpc.ClientConn) (interface{}, error) {
	return NewClient(conn), nil
}

// NewClient returns a Client that calls a driver plugin served on conn.
func NewClient(conn grpc.ClientConnInterface) Client {
	return &grpcClient{client: driverpb.NewDriverClient(conn)}
}

// grpcClient adapts the generated client to Driver.
type grpcClient struct {
	client driverpb.DriverClient
}

var _ Client = (*grpcClient)(nil)

func (c *grpcClient) Info(ctx context.Context) (*driverpb.InfoResponse, error) {
	resp, err := c.client.Info(ctx, &driverpb.InfoRequest{})
	return resp, fromStatus(err)
}

func (c *grpcClient) Fingerprint(ctx context.Context) (*driverpb.FingerprintResponse, error) {
	resp, err := c.client.Fingerprint(ctx, &driverpb.FingerprintRequest{})
	return resp, fromStatus(err)
}

func (c *grpcClient) StartTask(ctx context.Context, cfg *driverpb.TaskConfig) (*driverpb.TaskHandle, error) {
	resp, err := c.client.StartTask(ctx, &driverpb.StartTaskRequest{Task: cfg})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetHandle(), nil
}

func (c *grpcClient) WaitTask(ctx context.Context, id string) (*driverpb.ExitResult, error) {
	resp, err := c.client.WaitTask(ctx, &driverpb.WaitTaskRequest{Id: id})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetResult(), nil
}

func (c *grpcClient) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	_, err := c.client.StopTask(ctx, &driverpb.StopTaskRequest{
		Id:        id,
		TimeoutNs: int64(timeout),
		Signal:    signal,
	})
	return fromStatus(err)
}

func (c *grpcClient) DestroyTask(ctx context.Context, id string, force bool) error {
	_, err := c.client.DestroyTask(ctx, &driverpb.DestroyTaskRequest{Id: id, Force: force})
	return fromStatus(err)
}

func (c *grpcClient) InspectTask(ctx context.Context, id string) (*driverpb.TaskStatus, error) {
	resp, err := c.client.InspectTask(ctx, &driverpb.InspectTaskRequest{Id: id})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.GetStatus(), nil
}

func (c *grpcClient) SignalTask(ctx context.Context, id string, signal string) error {
	_, err := c.client.SignalTask(ctx, &driverpb.SignalTaskRequest{Id: id, Signal: signal})
	return fromStatus(err)
}

func (c *grpcClient) RecoverTask(ctx context.Context, handle *driverpb.TaskHandle) error {
	_, err := c.client.RecoverTask(ctx, &driverpb.RecoverTaskRequest{Handle: handle})
	return fromStatus(err)
}

// ValidateConfig implements ConfigValidator. A plugin that predates the
// call answers Unimplemented: it checks no config, so it accepts this one.
func (c *grpcClient) ValidateConfig(ctx context.Context, configJSON []byte) error {
	_, err := c.client.ValidateConfig(ctx, &driverpb.ValidateConfigRequest{ConfigJson: configJSON})
	if status.Code(err) == codes.Unimplemented {
		return nil
	}
	return fromStatus(err)
}

// grpcServer adapts a Driver to the generated server interface.
type grpcServer struct {
	driverpb.UnimplementedDriverServer
	impl Driver
}

func (s *grpcServer) Info(ctx context.Context, _ *driverpb.InfoRequest) (*driverpb.InfoResponse, error) {
	resp, err := s.impl.Info(ctx)
	return resp, toStatus(err)
}

func (s *grpcServer) Fingerprint(ctx context.Context, _ *driverpb.FingerprintRequest) (*driverpb.FingerprintResponse, error) {
	resp, err := s.impl.Fingerprint(ctx)
	return resp, toStatus(err)
}

func (s *grpcServer) StartTask(ctx context.Context, req *driverpb.StartTaskRequest) (*driverpb.StartTaskResponse, error) {
	if req.GetTask() == nil {
		return nil, toStatus(errMissing(ErrInvalidConfig, "task config"))
	}
	h, err := s.impl.StartTask(ctx, req.GetTask())
	if err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.StartTaskResponse{Handle: h}, nil
}

func (s *grpcServer) WaitTask(ctx context.Context, req *driverpb.WaitTaskRequest) (*driverpb.WaitTaskResponse, error) {
	res, err := s.impl.WaitTask(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.WaitTaskResponse{Result: res}, nil
}

func (s *grpcServer) StopTask(ctx context.Context, req *driverpb.StopTaskRequest) (*driverpb.StopTaskResponse, error) {
	err := s.impl.StopTask(ctx, req.GetId(), time.Duration(req.GetTimeoutNs()), req.GetSignal())
	if err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.StopTaskResponse{}, nil
}

func (s *grpcServer) DestroyTask(ctx context.Context, req *driverpb.DestroyTaskRequest) (*driverpb.DestroyTaskResponse, error) {
	if err := s.impl.DestroyTask(ctx, req.GetId(), req.GetForce()); err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.DestroyTaskResponse{}, nil
}

func (s *grpcServer) InspectTask(ctx context.Context, req *driverpb.InspectTaskRequest) (*driverpb.InspectTaskResponse, error) {
	st, err := s.impl.InspectTask(ctx, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.InspectTaskResponse{Status: st}, nil
}

func (s *grpcServer) SignalTask(ctx context.Context, req *driverpb.SignalTaskRequest) (*driverpb.SignalTaskResponse, error) {
	if err := s.impl.SignalTask(ctx, req.GetId(), req.GetSignal()); err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.SignalTaskResponse{}, nil
}

func (s *grpcServer) RecoverTask(ctx context.Context, req *driverpb.RecoverTaskRequest) (*driverpb.RecoverTaskResponse, error) {
	if req.GetHandle() == nil {
		return nil, toStatus(errMissing(ErrInvalidConfig, "task handle"))
	}
	if err := s.impl.RecoverTask(ctx, req.GetHandle()); err != nil {
		return nil, toStatus(err)
	}
	return &driverpb.RecoverTaskResponse{}, nil
}

func (s *grpcServer) ValidateConfig(ctx context.Context, req *driverpb.ValidateConfigRequest) (*driverpb.ValidateConfigResponse, error) {
	if v, ok := s.impl.(ConfigValidator); ok {
		if err := v.ValidateConfig(ctx, req.GetConfigJson()); err != nil {
			return nil, toStatus(err)
		}
	}
	return &driverpb.ValidateConfigResponse{}, nil
}

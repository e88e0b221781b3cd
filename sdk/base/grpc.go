package base

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/proto/basepb"
)

// ErrNoConfig is the host's answer for a plugin that does not serve the
// Base service (gRPC code UNIMPLEMENTED): it takes no config block.
var ErrNoConfig = errors.New("the plugin takes no config")

// ServiceName is the Base service's full gRPC name.
const ServiceName = "drover.base.v1.Base"

// Register registers the Base service on s for impl, a plugin kind's
// implementation, when impl is Configurable, and does nothing otherwise
// (the host then sees UNIMPLEMENTED: the plugin takes no config). Each
// kind's Plugin.GRPCServer calls it, so every way of serving an
// implementation (Serve, the conformance kits, tests) serves its config.
//
// go-plugin serves every kind of one binary on one gRPC server, and one
// process has one config block: a second Configurable implementation on
// the same server is an error.
func Register(s *grpc.Server, impl any) error {
	c, ok := impl.(Configurable)
	if !ok {
		return nil
	}
	cfg := c.PluginConfig()
	if cfg == nil || isNilPointer(cfg) {
		return fmt.Errorf("%T is Configurable but its PluginConfig returned nil: build its config (base.NewConfig) before serving it", impl)
	}
	if _, dup := s.GetServiceInfo()[ServiceName]; dup {
		return fmt.Errorf("%T is Configurable, but another implementation served by this process already registered the config service: one plugin process takes one config block", impl)
	}
	basepb.RegisterBaseServer(s, NewServer(cfg))
	return nil
}

// isNilPointer reports whether v is a nil pointer in an interface, as a
// PluginConfig returning an unset *Config field gives.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// NewServer returns the Base service serving cfg.
func NewServer(cfg Settable) basepb.BaseServer { return &server{cfg: cfg} }

// server is the plugin-side Base service.
type server struct {
	basepb.UnimplementedBaseServer
	cfg Settable
}

func (s *server) ConfigSchema(context.Context, *basepb.ConfigSchemaRequest) (*basepb.ConfigSchemaResponse, error) {
	return &basepb.ConfigSchemaResponse{Spec: s.cfg.Spec()}, nil
}

func (s *server) SetConfig(_ context.Context, req *basepb.SetConfigRequest) (*basepb.SetConfigResponse, error) {
	errs, err := s.cfg.SetJSON(req.GetConfigJson(), req.GetPluginName())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &basepb.SetConfigResponse{FieldErrors: errs}, nil
}

// Client is the host's side of the Base service.
type Client struct {
	c basepb.BaseClient
}

// NewClient returns a Base client over conn, the plugin's gRPC connection
// (the one its kind's client uses).
func NewClient(conn grpc.ClientConnInterface) *Client {
	return &Client{c: basepb.NewBaseClient(conn)}
}

// ConfigSchema returns the schema of the plugin's config block: nil when
// the plugin serves Base but takes no config, and an error wrapping
// ErrNoConfig when it does not serve Base at all. Other errors are the
// plugin's gRPC status errors (codes.Unavailable for a dead plugin).
func (c *Client) ConfigSchema(ctx context.Context) (*basepb.Spec, error) {
	resp, err := c.c.ConfigSchema(ctx, &basepb.ConfigSchemaRequest{})
	if err != nil {
		return nil, wrapUnimplemented(err)
	}
	return resp.GetSpec(), nil
}

// SetConfig hands the plugin its decoded config block (Decode's JSON) and
// returns the fields it refuses; none: the config is in force. An error
// means the config could not be judged (a status error, or ErrNoConfig
// wrapped for a plugin that does not serve Base).
func (c *Client) SetConfig(ctx context.Context, configJSON []byte, pluginName string) ([]*basepb.FieldError, error) {
	resp, err := c.c.SetConfig(ctx, &basepb.SetConfigRequest{ConfigJson: configJSON, PluginName: pluginName})
	if err != nil {
		return nil, wrapUnimplemented(err)
	}
	return resp.GetFieldErrors(), nil
}

func wrapUnimplemented(err error) error {
	if status.Code(err) == codes.Unimplemented {
		return fmt.Errorf("%w: %w", ErrNoConfig, err)
	}
	return err
}

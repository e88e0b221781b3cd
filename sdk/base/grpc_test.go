package base

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// configured is a plugin implementation that takes a config.
type configured struct{ cfg *Config[settings] }

func (c *configured) PluginConfig() Settable { return c.cfg }

// embedded is Configurable by embedding the config.
type embedded struct{ *Config[settings] }

// serve registers impl as a kind's GRPCServer would and returns a client
// connection to it over an in-memory listener.
func serve(t *testing.T, impl any) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	if err := Register(srv, impl); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///base",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-done
	})
	return conn
}

func TestClientServer(t *testing.T) {
	for _, tc := range []struct {
		name string
		impl func(*Config[settings]) any
	}{
		{"method", func(c *Config[settings]) any { return &configured{cfg: c} }},
		{"embedded", func(c *Config[settings]) any { return embedded{c} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newTestConfig(t)
			cl := NewClient(serve(t, tc.impl(cfg)))
			ctx := context.Background()
			spec, err := cl.ConfigSchema(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(spec, cfg.Spec()) {
				t.Fatalf("schema over gRPC differs: %v", spec)
			}
			js, diags := Decode(spec, parse(t, "mode = \"m\"\npage_size = 0\n"))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			errs, err := cl.SetConfig(ctx, js, "p")
			if err != nil || len(errs) != 1 || errs[0].GetPath() != "page_size" || errs[0].GetMessage() != "must be at least 1" {
				t.Fatalf("SetConfig: %v %v, want page_size: must be at least 1", FieldErrors(errs), err)
			}
			if cfg.Get().Mode != "" {
				t.Fatal("a refused config is in force")
			}
			if errs, err := cl.SetConfig(ctx, []byte(`{"mode":"m"}`), "p"); err != nil || len(errs) > 0 {
				t.Fatal(errs, err)
			}
			if cfg.Get().Mode != "m" {
				t.Fatalf("config in force %+v", cfg.Get())
			}
			_, err = cl.SetConfig(ctx, []byte(`not json`), "p")
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not JSON") {
				t.Fatalf("bad JSON: %v, want InvalidArgument", err)
			}
		})
	}
}

func TestClientUnconfigurable(t *testing.T) {
	cl := NewClient(serve(t, struct{}{}))
	if _, err := cl.ConfigSchema(context.Background()); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("ConfigSchema of a plugin without config: %v, want ErrNoConfig", err)
	}
	if _, err := cl.SetConfig(context.Background(), []byte(`{}`), "p"); !errors.Is(err, ErrNoConfig) {
		t.Fatalf("SetConfig of a plugin without config: %v, want ErrNoConfig", err)
	}
}

func TestRegisterRefuses(t *testing.T) {
	srv := grpc.NewServer()
	if err := Register(srv, &configured{}); err == nil || !strings.Contains(err.Error(), "PluginConfig returned nil") {
		t.Fatalf("nil config: %v", err)
	}
	if err := Register(srv, embedded{}); err == nil || !strings.Contains(err.Error(), "PluginConfig returned nil") {
		t.Fatalf("nil embedded config: %v", err)
	}
	if err := Register(srv, &configured{cfg: newTestConfig(t)}); err != nil {
		t.Fatal(err)
	}
	if err := Register(srv, &configured{cfg: newTestConfig(t)}); err == nil || !strings.Contains(err.Error(), "one config block") {
		t.Fatalf("second config on one server: %v", err)
	}
}

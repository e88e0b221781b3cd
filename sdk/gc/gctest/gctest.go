// Package gctest helps test GC plugins: Connect serves a Collector over an
// in-memory gRPC connection with the same adapters and options as a real
// plugin, so every page and every response is really marshalled and checked
// on both sides.
package gctest

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/base/basetest"
	"github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/shared"
)

// TB is the part of testing.TB Connect uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Connect serves impl over bufconn and returns the host-side Collector stub.
// Everything is torn down when t ends.
func Connect(t TB, impl gc.Collector) gc.Collector {
	t.Helper()
	raw, err := (&gc.Plugin{}).GRPCClient(context.Background(), nil, ConnectConn(t, impl))
	if err != nil {
		t.Fatalf("gctest: client: %v", err)
	}
	return raw.(gc.Collector)
}

// ConnectConn serves impl as Connect does and returns the client
// connection itself, for the services beside the GC one (the Base service
// of a base.Configurable implementation: base.NewClient(conn)).
func ConnectConn(t TB, impl gc.Collector) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(shared.ServerOptions()...)
	p := &gc.Plugin{Impl: impl}
	if err := p.GRPCServer(nil, srv); err != nil {
		t.Fatalf("gctest: register server: %v", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	opts := append(shared.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return lis.DialContext(ctx)
		}),
	)
	conn, err := grpc.NewClient("passthrough:///gctest", opts...)
	if err != nil {
		srv.Stop()
		<-served
		t.Fatalf("gctest: dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	return conn
}

// ConfigTB is the part of testing.TB RunConfig uses.
type ConfigTB interface {
	TB
	Errorf(format string, args ...any)
}

// RunConfig serves impl over bufconn and checks its config schema round
// trip (package basetest), reporting every failure with t.Errorf. A
// collector that takes no config passes. It leaves the collector's config
// at its defaults.
func RunConfig(t ConfigTB, impl gc.Collector) {
	t.Helper()
	basetest.CheckConfig(t, base.NewClient(ConnectConn(t, impl)))
}

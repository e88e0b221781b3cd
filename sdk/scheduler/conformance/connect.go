package conformance

import (
	"context"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// TB is the part of testing.TB the kit uses. *testing.T, *testing.B and
// testing.TB satisfy it; the kit's own tests use a recorder so they can
// assert that a broken scheduler fails.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Connect serves impl over an in-memory gRPC connection and returns the
// host-side Scheduler stub, so every request and response is really
// marshalled, sent and unmarshalled. Everything is torn down when t ends.
//
// It uses the same adapters as a real plugin (scheduler.Plugin) and the
// same gRPC options (shared.ServerOptions, shared.DialOptions), so a request
// too large for production fails here too. go-plugin's TestPluginGRPCConn
// is not used because it serves with gRPC's default 4 MiB receive limit,
// which a request for a few thousand nodes already exceeds.
func Connect(t TB, impl scheduler.Scheduler) scheduler.Scheduler {
	t.Helper()
	conn := ConnectConn(t, impl)
	raw, err := (&scheduler.Plugin{}).GRPCClient(context.Background(), nil, conn)
	if err != nil {
		t.Fatalf("conformance: client: %v", err)
	}
	return raw.(scheduler.Scheduler)
}

// ConnectConn serves impl as Connect does and returns the client
// connection itself, for the services beside the Scheduler one (the Base
// service of a base.Configurable implementation: base.NewClient(conn)).
func ConnectConn(t TB, impl scheduler.Scheduler) *grpc.ClientConn {
	t.Helper()

	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(shared.ServerOptions()...)
	p := &scheduler.Plugin{Impl: impl}
	if err := p.GRPCServer(nil, srv); err != nil {
		t.Fatalf("conformance: register server: %v", err)
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
	conn, err := grpc.NewClient("passthrough:///conformance", opts...)
	if err != nil {
		srv.Stop()
		<-served
		t.Fatalf("conformance: dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})

	return conn
}

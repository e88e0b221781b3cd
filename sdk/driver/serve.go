package driver

import (
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/sdk/shared"
)

// Serve serves impl as a driver plugin on this process's stdio, as
// go-plugin expects of a plugin binary, and returns when the host closes
// the connection. A driver binary's main does little else.
func Serve(impl Driver) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins:         plugin.PluginSet{shared.KindDriver: &Plugin{Impl: impl}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, shared.ServerOptions()...)...)
		},
	})
}

// errMissing reports a required request field the client left out.
func errMissing(kind error, what string) error {
	return fmt.Errorf("%w: %s is missing", kind, what)
}

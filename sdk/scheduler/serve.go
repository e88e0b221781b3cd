package scheduler

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/sdk/shared"
)

// Serve serves impl as a scheduler plugin and returns when the host tells the
// plugin to exit. Call it from the plugin's main function; it never returns
// normally when the binary is run by hand (go-plugin exits with a message
// when the handshake environment is missing).
//
// The plugin logs through hclog in JSON on stderr, which go-plugin forwards
// into the agent's log with levels and fields intact.
func Serve(impl Scheduler) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins:         plugin.PluginSet{shared.KindScheduler: &Plugin{Impl: impl}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return plugin.DefaultGRPCServer(append(opts, shared.ServerOptions()...))
		},
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       shared.KindScheduler,
			Level:      hclog.Debug,
			Output:     os.Stderr,
			JSONFormat: true,
		}),
	})
}

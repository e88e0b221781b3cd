package shared

import (
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// NewPluginLogger returns the logger a plugin of any kind logs with: hclog
// writing JSON to stderr, from debug up. go-plugin forwards a plugin's
// stderr to the agent, which parses these lines and logs them under the
// plugin's name with their levels and fields intact; the agent's own log
// level filters what is shown. name is the logger's name ("" for none).
func NewPluginLogger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.Debug,
		Output:     os.Stderr,
		JSONFormat: true,
	})
}

// ServePlugin serves p as the plugin of kind on this process's stdio, as
// go-plugin expects of a plugin binary, with drover's handshake and gRPC
// server options, and returns when the host tells the plugin to exit.
// Each kind's SDK wraps it in its Serve. p's GRPCServer also registers
// the base service (sdk/base) when its implementation takes a config.
func ServePlugin(kind string, p plugin.Plugin, logger hclog.Logger) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: Handshake,
		Plugins:         plugin.PluginSet{kind: p},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			return grpc.NewServer(append(opts, ServerOptions()...)...)
		},
		Logger: logger,
	})
}

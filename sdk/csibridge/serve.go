package csibridge

import (
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/shared"
)

// NewLogger returns the logger a bridge plugin should log with: hclog
// writing JSON to stderr, from debug up. go-plugin forwards a plugin's
// stderr to the agent, which parses these lines and logs them under the
// plugin's name with their levels and fields intact; the agent's own log
// level filters what is shown. name is the logger's name ("" for none).
func NewLogger(name string) hclog.Logger { return shared.NewPluginLogger(name) }

// Serve serves impl as a csi-bridge plugin on this process's stdio, as
// go-plugin expects of a plugin binary, and returns when the host closes
// the connection. A bridge binary's main does little else. A bridge that
// logs builds its logger with NewLogger, hands it to its implementation
// and calls ServeWithLogger with it.
func Serve(impl Bridge) {
	ServeWithLogger(impl, NewLogger(shared.KindCSIBridge))
}

// ServeWithLogger is Serve with the logger go-plugin's server logs with;
// it should write JSON to stderr, as NewLogger's does.
func ServeWithLogger(impl Bridge, logger hclog.Logger) {
	shared.ServePlugin(shared.KindCSIBridge, &Plugin{Impl: impl}, logger)
}

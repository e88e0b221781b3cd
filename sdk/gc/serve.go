package gc

import (
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/shared"
)

// NewLogger returns the logger a GC plugin should log with: hclog writing
// JSON to stderr, which go-plugin forwards to the agent. name is the
// logger's name ("" for none).
func NewLogger(name string) hclog.Logger { return shared.NewPluginLogger(name) }

// Serve serves impl as a GC plugin and returns when the host tells the
// plugin to exit. Call it from the plugin's main function.
func Serve(impl Collector) {
	ServeWithLogger(impl, NewLogger(shared.KindGC))
}

// ServeWithLogger is Serve with the logger go-plugin's server logs with;
// it should write JSON to stderr, as NewLogger's does.
func ServeWithLogger(impl Collector, logger hclog.Logger) {
	shared.ServePlugin(shared.KindGC, &Plugin{Impl: impl}, logger)
}

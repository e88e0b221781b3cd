package scheduler

import (
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/shared"
)

// NewLogger returns the logger a scheduler plugin should log with: hclog
// writing JSON to stderr. go-plugin forwards a plugin's stderr to the
// agent, which parses these lines and logs them under the plugin's name
// with their levels and fields intact (plain text lines arrive too, but as
// unstructured debug lines). It logs from debug up; the agent's own log
// level filters what is shown.
// name is the logger's name ("" for none).
func NewLogger(name string) hclog.Logger { return shared.NewPluginLogger(name) }

// Serve serves impl as a scheduler plugin and returns when the host tells the
// plugin to exit. Call it from the plugin's main function; it never returns
// normally when the binary is run by hand (go-plugin exits with a message
// when the handshake environment is missing).
//
// A plugin that logs passes the logger it built with NewLogger to its
// implementation and calls ServeWithLogger instead, so its own lines and
// go-plugin's share one logger:
//
//	func main() {
//		log := scheduler.NewLogger("gpu-batch")
//		scheduler.ServeWithLogger(gpubatch.New(log), log)
//	}
func Serve(impl Scheduler) {
	ServeWithLogger(impl, NewLogger(shared.KindScheduler))
}

// ServeWithLogger is Serve with the logger go-plugin's server logs with;
// it should write JSON to stderr, as NewLogger's does.
func ServeWithLogger(impl Scheduler, logger hclog.Logger) {
	shared.ServePlugin(shared.KindScheduler, &Plugin{Impl: impl}, logger)
}

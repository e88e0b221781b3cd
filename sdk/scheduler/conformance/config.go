package conformance

import (
	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/base/basetest"
	"github.com/drover-org/drover/sdk/scheduler"
)

// RunConfig serves impl over in-memory gRPC (ConnectConn) and checks its
// config schema round trip, as the agent makes it (package basetest):
// the schema decodes, the defaults and every attribute's default are
// accepted, a wrong type and an unknown field are refused with the field
// named. Every failure is reported with t.Errorf. A scheduler that takes
// no config passes. It leaves impl's config at its defaults, so run it
// before tests that set a config, or apart from them:
//
//	func TestConfigConformance(t *testing.T) {
//		conformance.RunConfig(t, myplugin.New())
//	}
func RunConfig(t TB, impl scheduler.Scheduler) {
	t.Helper()
	basetest.CheckConfig(t, base.NewClient(ConnectConn(t, impl)))
}

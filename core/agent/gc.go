package agent

import (
	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/server"
)

var _ server.GCRouter = pluginhost.GCRouter{}

// GCRouter adapts the plugin host's gc plugins to the server's GC router
// (pluginhost.GCRouter says how a collection is routed).
func GCRouter(host *pluginhost.Host) server.GCRouter { return host.GC() }

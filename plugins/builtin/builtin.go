// Package builtin lists the plugins compiled into the drover binary. They
// still run out of process: the agent re-executes its own binary as
// `drover plugin <name>`, which calls the plugin's Serve.
package builtin

import (
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	sysbatch "github.com/drover-org/drover/plugins/scheduler-sysbatch"
	system "github.com/drover-org/drover/plugins/scheduler-system"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// Plugin is one built-in plugin.
type Plugin struct {
	Name string
	Kind string
	// Serve runs the plugin's go-plugin server; it does not return.
	Serve func()
}

// Catalog is every built-in plugin, in launch order.
var Catalog = []Plugin{
	{Name: "scheduler-system", Kind: shared.KindScheduler, Serve: func() { scheduler.Serve(system.New()) }},
	{Name: "scheduler-sysbatch", Kind: shared.KindScheduler, Serve: func() { scheduler.Serve(sysbatch.New()) }},
	{Name: "driver-rawexec", Kind: shared.KindDriver, Serve: rawexec.Serve},
}

// Lookup finds a built-in plugin by name.
func Lookup(name string) (Plugin, bool) {
	for _, p := range Catalog {
		if p.Name == name {
			return p, true
		}
	}
	return Plugin{}, false
}

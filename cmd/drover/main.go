// Command drover is the single drover binary: the CLI, the agent
// (`drover agent`) and the built-in plugins (`drover plugin <name>`).
package main

import (
	"os"

	"github.com/drover-org/drover/core/command"
	"github.com/drover-org/drover/plugins/builtin"
)

func main() {
	// A built-in plugin (and the raw_exec shim, which re-executes the
	// plugin's command line) must start before anything is printed.
	if len(os.Args) > 2 && os.Args[1] == "plugin" {
		if p, ok := builtin.Lookup(os.Args[2]); ok {
			p.Serve()
			os.Exit(0)
		}
	}
	os.Exit(command.Run(os.Args[1:], map[string]command.Command{
		"agent":  agentCommand{},
		"plugin": pluginCommand{},
	}))
}

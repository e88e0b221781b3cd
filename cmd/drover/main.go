// Command drover is the single drover binary: the CLI, the agent
// (`drover agent`) and the built-in plugins (`drover __plugin <name>`, run
// by the agent only).
package main

import (
	"os"

	"github.com/drover-org/drover/core/command"
	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/plugins/builtin"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	"github.com/drover-org/drover/sdk/shared"
)

func main() {
	// A built-in plugin (and the raw_exec shim, which re-executes the
	// plugin's command line) must start before anything is printed.
	if p, ok := servedBuiltin(os.Args[1:], os.Getenv); ok {
		p.Serve()
		os.Exit(0)
	}
	os.Exit(command.Run(os.Args[1:], map[string]command.Command{
		"agent": agentCommand{},
	}))
}

// servedBuiltin picks the built-in plugin the command line asks to serve:
// `__plugin <name>`. The name the agent used before, `plugin <name>`, is
// honoured only when the process was started by a plugin host (go-plugin's
// handshake cookie or the raw_exec shim's marker is set), so an agent of
// the previous version can still relaunch its plugins from an upgraded
// binary while a user typing `drover plugin …` never starts one.
func servedBuiltin(args []string, getenv func(string) string) (builtin.Plugin, bool) {
	if len(args) < 2 {
		return builtin.Plugin{}, false
	}
	switch args[0] {
	case pluginhost.ServeCommand:
	case "plugin":
		if getenv(shared.Handshake.MagicCookieKey) != shared.Handshake.MagicCookieValue && getenv(rawexec.ShimEnvVar) == "" {
			return builtin.Plugin{}, false
		}
	default:
		return builtin.Plugin{}, false
	}
	return builtin.Lookup(args[1])
}

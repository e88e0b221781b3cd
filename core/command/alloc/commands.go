// Package alloc holds the `drover alloc …`, `drover eval …` and
// `drover service …` commands.
package alloc

import (
	"maps"

	"github.com/drover-org/drover/core/command/cli"
)

// allocCommands returns the commands of `drover alloc …`, `drover eval …` and `drover service …` by name.
func Commands(ui *cli.UI) map[string]cli.Command {
	cmds := map[string]cli.Command{
		"alloc status": &AllocStatusCommand{ui: ui},
		"alloc logs":   &AllocLogsCommand{ui: ui},
		"alloc stop":   &AllocStopCommand{ui: ui},
		"eval status":  &EvalStatusCommand{ui: ui},
		"eval list":    &EvalListCommand{ui: ui},
	}
	maps.Copy(cmds, serviceCommands(ui))
	maps.Copy(cmds, clientCommands(ui))
	return cmds
}

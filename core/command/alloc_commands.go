package command

import "maps"

// allocCommands returns the commands of `drover alloc …`, `drover eval …` and `drover service …` by name.
func allocCommands(ui *UI) map[string]Command {
	cmds := map[string]Command{
		"alloc status": &AllocStatusCommand{ui: ui},
		"alloc logs":   &AllocLogsCommand{ui: ui},
		"alloc stop":   &AllocStopCommand{ui: ui},
		"eval status":  &EvalStatusCommand{ui: ui},
		"eval list":    &EvalListCommand{ui: ui},
	}
	maps.Copy(cmds, serviceCommands(ui))
	return cmds
}

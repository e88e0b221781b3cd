package command

import "maps"

// nodeCommands returns the commands of `drover node …` and `drover node pool …` by name.
func nodeCommands(ui *UI) map[string]Command {
	cmds := map[string]Command{
		"node status":      &NodeStatusCommand{ui: ui},
		"node eligibility": &NodeEligibilityCommand{ui: ui},
		"node drain":       &NodeDrainCommand{ui: ui},
	}
	maps.Copy(cmds, nodePoolCommands(ui))
	return cmds
}

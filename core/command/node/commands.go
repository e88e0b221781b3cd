// Package node holds the `drover node …` and `drover node pool …`
// commands.
package node

import (
	"maps"

	"github.com/drover-org/drover/core/command/cli"
)

// nodeCommands returns the commands of `drover node …` and `drover node pool …` by name.
func Commands(ui *cli.UI) map[string]cli.Command {
	cmds := map[string]cli.Command{
		"node status":      &NodeStatusCommand{ui: ui},
		"node eligibility": &NodeEligibilityCommand{ui: ui},
		"node drain":       &NodeDrainCommand{ui: ui},
	}
	maps.Copy(cmds, nodePoolCommands(ui))
	maps.Copy(cmds, metaCommands(ui))
	return cmds
}

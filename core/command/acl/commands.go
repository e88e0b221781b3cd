// Package acl holds the `drover acl …` commands (bootstrap, policies,
// tokens) and the `drover namespace …` commands.
package acl

import (
	"maps"

	"github.com/drover-org/drover/core/command/cli"
)

// aclCommands returns the commands of `drover acl …` and `drover namespace …` by name.
func Commands(ui *cli.UI) map[string]cli.Command {
	cmds := map[string]cli.Command{
		"acl bootstrap":    &ACLBootstrapCommand{ui: ui},
		"namespace list":   &NamespaceListCommand{ui: ui},
		"namespace status": &NamespaceStatusCommand{ui: ui},
		"namespace apply":  &NamespaceApplyCommand{ui: ui},
		"namespace delete": &NamespaceDeleteCommand{ui: ui},
	}
	maps.Copy(cmds, aclManageCommands(ui))
	return cmds
}

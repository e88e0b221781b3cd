package command

import "maps"

// aclCommands returns the commands of `drover acl …` and `drover namespace …` by name.
func aclCommands(ui *UI) map[string]Command {
	cmds := map[string]Command{
		"acl bootstrap":    &ACLBootstrapCommand{ui: ui},
		"namespace list":   &NamespaceListCommand{ui: ui},
		"namespace status": &NamespaceStatusCommand{ui: ui},
		"namespace apply":  &NamespaceApplyCommand{ui: ui},
		"namespace delete": &NamespaceDeleteCommand{ui: ui},
	}
	maps.Copy(cmds, aclManageCommands(ui))
	return cmds
}

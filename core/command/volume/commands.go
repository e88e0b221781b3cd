// Package volume holds the `drover volume …` commands and
// `drover plugin status`.
package volume

import "github.com/drover-org/drover/core/command/cli"

// volumeCommands returns the commands of `drover volume …` and `drover plugin status` by name.
func Commands(ui *cli.UI) map[string]cli.Command {
	cmds := map[string]cli.Command{
		"volume register":   &VolumeRegisterCommand{ui: ui},
		"volume deregister": &VolumeDeregisterCommand{ui: ui},
		"volume status":     &VolumeStatusCommand{ui: ui},
		"volume create":     &VolumeCreateCommand{ui: ui},
		"volume delete":     &VolumeDeleteCommand{ui: ui},
		"volume detach":     &VolumeDetachCommand{ui: ui},
		"plugin status":     &PluginStatusCommand{ui: ui},
	}
	return cmds
}

package command

// volumeCommands returns the commands of `drover volume …` and `drover plugin status` by name.
func volumeCommands(ui *UI) map[string]Command {
	cmds := map[string]Command{
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

package command

import "maps"

// jobCommands returns the commands of `drover job …`, `drover status`, `drover deployment …` and `drover scaling policy …` by name.
func jobCommands(ui *UI) map[string]Command {
	cmds := map[string]Command{
		"job run":            &JobRunCommand{ui: ui},
		"job plan":           &JobPlanCommand{ui: ui},
		"job validate":       &JobValidateCommand{ui: ui},
		"job status":         &JobStatusCommand{ui: ui},
		"job stop":           &JobStopCommand{ui: ui},
		"job dispatch":       &JobDispatchCommand{ui: ui},
		"job periodic force": &JobPeriodicForceCommand{ui: ui},
		"job eval":           &JobEvalCommand{ui: ui},
		"job inspect":        &JobInspectCommand{ui: ui},
		"job scale":          &JobScaleCommand{ui: ui},
		"job revert":         &JobRevertCommand{ui: ui},
		"status":             &JobStatusCommand{ui: ui, alias: "status"},
	}
	maps.Copy(cmds, scalingCommands(ui))
	maps.Copy(cmds, deploymentCommands(ui))
	return cmds
}

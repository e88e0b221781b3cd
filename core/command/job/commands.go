// Package job holds the `drover job …` commands, `drover status`, and the
// `drover deployment …` and `drover scaling policy …` commands, which
// speak of a job's rollouts and scaling.
package job

import (
	"maps"

	"github.com/drover-org/drover/core/command/cli"
)

// jobCommands returns the commands of `drover job …`, `drover status`, `drover deployment …` and `drover scaling policy …` by name.
func Commands(ui *cli.UI) map[string]cli.Command {
	cmds := map[string]cli.Command{
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

// Package operator holds the cluster commands: `drover server members`,
// `drover operator …` and `drover system gc`.
package operator

import "github.com/drover-org/drover/core/command/cli"

// Commands returns the commands of `drover server members`, `drover agent-info`, `drover monitor`, `drover operator …` and `drover system gc` by name.
func Commands(ui *cli.UI) map[string]cli.Command {
	cmds := map[string]cli.Command{
		"server members":            &ServerMembersCommand{ui: ui},
		"agent-info":                &AgentInfoCommand{ui: ui},
		"monitor":                   &MonitorCommand{ui: ui},
		"operator raft list-peers":  &OperatorRaftListPeersCommand{ui: ui},
		"operator raft remove-peer": &OperatorRaftRemovePeerCommand{ui: ui},
		"operator plugin list":      &OperatorPluginListCommand{ui: ui},
		"operator join-token":       &OperatorJoinTokenCommand{ui: ui},
		"operator plugin status":    &OperatorPluginStatusCommand{ui: ui},
		"operator plugin reload":    &OperatorPluginReloadCommand{ui: ui},
		"operator events":           &OperatorEventsCommand{ui: ui},
		"operator snapshot save":    &OperatorSnapshotSaveCommand{ui: ui},
		"operator snapshot restore": &OperatorSnapshotRestoreCommand{ui: ui},
		"operator snapshot inspect": &OperatorSnapshotInspectCommand{ui: ui},
		"system gc":                 &SystemGCCommand{ui: ui},

		"operator snapshot extract-ca":  &OperatorSnapshotExtractCACommand{ui: ui},
		"operator autopilot get-config": &OperatorAutopilotGetCommand{ui: ui},
		"operator autopilot set-config": &OperatorAutopilotSetCommand{ui: ui},
		"operator autopilot health":     &OperatorAutopilotHealthCommand{ui: ui},
	}
	return cmds
}

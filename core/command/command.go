// Package command is drover's command line: `drover job run`, `drover alloc
// logs`, `drover node drain` and the rest, speaking to an agent through
// Nomad's v1 HTTP API. Output reads like Nomad's, and every read takes
// -json for scripts.
//
// cmd/drover calls Run with the commands that live outside this package
// (the agent), so this package never imports the agent.
package command

import "maps"

// Run runs the command named by args with the process's terminal and
// returns its exit code. extra adds or replaces commands by name (a
// multi-word name like "operator raft" is matched word by word), which is
// how cmd/drover adds `agent` and `plugin` without this package importing
// them.
func Run(args []string, extra map[string]Command) int {
	return RunUI(DefaultUI(), args, extra)
}

// RunUI is Run with an explicit UI.
func RunUI(ui *UI, args []string, extra map[string]Command) int {
	cmds := Commands(ui)
	for name, c := range extra {
		cmds[name] = c
	}
	return dispatch(ui, args, cmds)
}

// Commands returns the built-in commands by name: each area's table, and
// the commands that live here.
func Commands(ui *UI) map[string]Command {
	cmds := map[string]Command{
		"version": &VersionCommand{ui: ui},
		"ui":      &UICommand{ui: ui},
	}
	for _, area := range []func(*UI) map[string]Command{
		jobCommands, allocCommands, nodeCommands, operatorCommands,
		aclCommands, volumeCommands,
	} {
		maps.Copy(cmds, area(ui))
	}
	return cmds
}

// Package command is drover's command line: `drover job run`, `drover alloc
// logs`, `drover node drain` and the rest, speaking to an agent through
// Nomad's v1 HTTP API. Output reads like Nomad's, and every read takes
// -json for scripts.
//
// The commands live in one package per area (job, alloc, node, volume,
// acl, operator) over the shared plumbing of package cli; this package
// holds the command table that joins them and the dispatch entry point.
// cmd/drover calls Run with the commands that live outside this package
// (the agent), so this package never imports the agent.
package command

import (
	"maps"

	"github.com/drover-org/drover/core/command/acl"
	"github.com/drover-org/drover/core/command/alloc"
	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/command/job"
	"github.com/drover-org/drover/core/command/node"
	"github.com/drover-org/drover/core/command/operator"
	varcmd "github.com/drover-org/drover/core/command/var"
	"github.com/drover-org/drover/core/command/volume"
)

// Command is one subcommand (see cli.Command).
type Command = cli.Command

// UI is where a command reads and writes (see cli.UI).
type UI = cli.UI

// Run runs the command named by args with the process's terminal and
// returns its exit code. extra adds or replaces commands by name (a
// multi-word name like "operator raft" is matched word by word), which is
// how cmd/drover adds `agent` and `plugin` without this package importing
// them.
func Run(args []string, extra map[string]Command) int {
	return RunUI(cli.DefaultUI(), args, extra)
}

// RunUI is Run with an explicit UI.
func RunUI(ui *UI, args []string, extra map[string]Command) int {
	cmds := Commands(ui)
	for name, c := range extra {
		cmds[name] = c
	}
	return cli.Dispatch(ui, args, cmds)
}

// Commands returns the built-in commands by name: each area's table, and
// the commands that live here.
func Commands(ui *UI) map[string]Command {
	cmds := map[string]Command{
		"version": &VersionCommand{ui: ui, name: programName()},
		"ui":      &UICommand{ui: ui},
	}
	for _, area := range []func(*UI) map[string]Command{
		job.Commands, alloc.Commands, node.Commands, operator.Commands,
		acl.Commands, volume.Commands, varcmd.Commands,
	} {
		maps.Copy(cmds, area(ui))
	}
	return cmds
}

package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Dispatch runs the command of cmds that args name, or lists the commands
// of the group they name, and returns the exit code.
func Dispatch(ui *UI, args []string, cmds map[string]Command) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		printCommandList(ui.Err, "", cmds)
		if len(args) == 0 {
			return ExitError
		}
		return ExitOK
	}
	if args[0] == "-v" || args[0] == "-version" || args[0] == "--version" {
		args = append([]string{"version"}, args[1:]...)
	}
	// The longest run of leading words that names a command wins.
	for n := len(args); n > 0; n-- {
		name := strings.Join(args[:n], " ")
		if c, ok := cmds[name]; ok {
			return c.Run(args[n:])
		}
	}
	// A command group ("job", "operator raft") lists its subcommands; the
	// longest group named wins, as for commands.
	for n := len(args); n > 0; n-- {
		group := strings.Join(args[:n], " ")
		if sub := subcommands(group, cmds); len(sub) > 0 {
			printCommandList(ui.Err, group, cmds)
			if len(args) > n && args[n] != "-h" && args[n] != "-help" && args[n] != "--help" {
				return ExitError
			}
			return ExitOK
		}
	}
	fmt.Fprintf(ui.Err, "Unknown command %q\n\n", args[0])
	printCommandList(ui.Err, "", cmds)
	return ExitError
}

func subcommands(group string, cmds map[string]Command) []string {
	var out []string
	for name := range cmds {
		if rest, ok := strings.CutPrefix(name, group+" "); ok {
			out = append(out, rest)
		}
	}
	sort.Strings(out)
	return out
}

func printCommandList(w io.Writer, group string, cmds map[string]Command) {
	if group == "" {
		fmt.Fprintln(w, "Usage: drover [-version] [-help] <command> [args]")
	} else {
		fmt.Fprintf(w, "Usage: drover %s <subcommand> [options] [args]\n", group)
	}
	fmt.Fprintln(w, "\nAvailable commands:")
	var names []string
	for name := range cmds {
		if group == "" || strings.HasPrefix(name, group+" ") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(w, "    %-*s  %s\n", width, n, cmds[n].Synopsis())
	}
}

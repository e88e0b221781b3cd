// Package command is drover's command line: `drover job run`, `drover alloc
// logs`, `drover node drain` and the rest, speaking to an agent through
// Nomad's v1 HTTP API. Output reads like Nomad's, and every read takes
// -json for scripts.
//
// cmd/drover calls Run with the commands that live outside this package
// (the agent), so this package never imports the agent.
package command

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

// Command is one subcommand. Run receives the arguments after the
// command's name and returns the process exit code.
type Command interface {
	Run(args []string) int
	// Synopsis is the one-line description shown in command lists.
	Synopsis() string
}

// Exit codes shared by the commands. Placement failures have their own code
// so that scripts can tell them from errors, as Nomad's CLI does.
const (
	exitOK               = 0
	exitError            = 1
	exitPlacementFailure = 2
	exitPlanError        = 255
)

// UI is where a command reads and writes. Tests swap every part of it.
type UI struct {
	Out io.Writer
	Err io.Writer
	In  io.Reader
	// Getenv reads the environment (DROVER_ADDR, NOMAD_ADDR, …).
	Getenv func(string) string
	// Environ lists the environment, for the NOMAD_VAR_<name> values of
	// a job file's variables; nil has none.
	Environ func() []string
	// HTTP is the client used to reach the agent; nil uses a default.
	HTTP *http.Client
	// Now is the clock for "5m ago" columns.
	Now func() time.Time
	// OpenURL opens an address in a browser (`drover ui`); nil uses the
	// desktop's opener, and an error prints the address instead.
	OpenURL func(string) error
}

// DefaultUI is the process's terminal.
func DefaultUI() *UI {
	return &UI{Out: os.Stdout, Err: os.Stderr, In: os.Stdin, Getenv: os.Getenv, Environ: os.Environ, Now: time.Now}
}

func (u *UI) printf(format string, args ...any) { fmt.Fprintf(u.Out, format, args...) }

// errorf prints to the error stream and returns exitError, so that a
// command can `return ui.errorf(...)`.
func (u *UI) errorf(format string, args ...any) int {
	fmt.Fprintf(u.Err, format, args...)
	if !strings.HasSuffix(format, "\n") {
		fmt.Fprintln(u.Err)
	}
	return exitError
}

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
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		printCommandList(ui.Err, "", cmds)
		if len(args) == 0 {
			return exitError
		}
		return exitOK
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
				return exitError
			}
			return exitOK
		}
	}
	fmt.Fprintf(ui.Err, "Unknown command %q\n\n", args[0])
	printCommandList(ui.Err, "", cmds)
	return exitError
}

// Commands returns the built-in commands by name.
func Commands(ui *UI) map[string]Command {
	cmds := map[string]Command{
		"job run":                   &JobRunCommand{ui: ui},
		"job plan":                  &JobPlanCommand{ui: ui},
		"job validate":              &JobValidateCommand{ui: ui},
		"job status":                &JobStatusCommand{ui: ui},
		"job stop":                  &JobStopCommand{ui: ui},
		"job dispatch":              &JobDispatchCommand{ui: ui},
		"job periodic force":        &JobPeriodicForceCommand{ui: ui},
		"job eval":                  &JobEvalCommand{ui: ui},
		"job inspect":               &JobInspectCommand{ui: ui},
		"job scale":                 &JobScaleCommand{ui: ui},
		"job revert":                &JobRevertCommand{ui: ui},
		"alloc status":              &AllocStatusCommand{ui: ui},
		"alloc logs":                &AllocLogsCommand{ui: ui},
		"alloc stop":                &AllocStopCommand{ui: ui},
		"eval status":               &EvalStatusCommand{ui: ui},
		"eval list":                 &EvalListCommand{ui: ui},
		"node status":               &NodeStatusCommand{ui: ui},
		"node eligibility":          &NodeEligibilityCommand{ui: ui},
		"node drain":                &NodeDrainCommand{ui: ui},
		"server members":            &ServerMembersCommand{ui: ui},
		"operator raft list-peers":  &OperatorRaftListPeersCommand{ui: ui},
		"operator raft remove-peer": &OperatorRaftRemovePeerCommand{ui: ui},
		"operator plugin list":      &OperatorPluginListCommand{ui: ui},
		"operator join-token":       &OperatorJoinTokenCommand{ui: ui},
		"operator plugin status":    &OperatorPluginStatusCommand{ui: ui},
		"operator plugin reload":    &OperatorPluginReloadCommand{ui: ui},
		"operator events":           &OperatorEventsCommand{ui: ui},
		"status":                    &JobStatusCommand{ui: ui, alias: "status"},
		"version":                   &VersionCommand{ui: ui},
		"ui":                        &UICommand{ui: ui},
		"acl bootstrap":             &ACLBootstrapCommand{ui: ui},
		"namespace list":            &NamespaceListCommand{ui: ui},
		"namespace status":          &NamespaceStatusCommand{ui: ui},
		"namespace apply":           &NamespaceApplyCommand{ui: ui},
		"namespace delete":          &NamespaceDeleteCommand{ui: ui},
		"volume register":           &VolumeRegisterCommand{ui: ui},
		"volume deregister":         &VolumeDeregisterCommand{ui: ui},
		"volume status":             &VolumeStatusCommand{ui: ui},
		"volume create":             &VolumeCreateCommand{ui: ui},
		"volume delete":             &VolumeDeleteCommand{ui: ui},
		"volume detach":             &VolumeDetachCommand{ui: ui},
		"plugin status":             &PluginStatusCommand{ui: ui},
		"system gc":                 &SystemGCCommand{ui: ui},
	}
	maps.Copy(cmds, aclCommands(ui))
	maps.Copy(cmds, deploymentCommands(ui))
	maps.Copy(cmds, serviceCommands(ui))
	maps.Copy(cmds, scalingCommands(ui))
	maps.Copy(cmds, nodePoolCommands(ui))
	return cmds
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

// meta holds the flags every API command takes and builds its client.
type meta struct {
	ui        *UI
	address   string
	token     string
	namespace string
	tls       TLSOptions
}

// flagSet makes a command's FlagSet with the common API flags; usage is the
// command's help text, printed on -h and on a flag error.
func (m *meta) flagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.ui.Err)
	fs.Usage = func() { fmt.Fprintln(m.ui.Err, strings.TrimSpace(usage)+"\n"+generalOptions) }
	fs.StringVar(&m.address, "address", "", "")
	fs.StringVar(&m.token, "token", "", "")
	fs.StringVar(&m.namespace, "namespace", "", "")
	m.tlsFlags(fs)
	return fs
}

const generalOptions = `
General Options:

  -address=<addr>
    The address of the drover agent. Overrides DROVER_ADDR and NOMAD_ADDR.
    Default = http://127.0.0.1:4646

  -token=<token>
    The secret ID of an ACL token. Overrides DROVER_TOKEN and NOMAD_TOKEN.

  -namespace=<namespace>
    The target namespace. Overrides DROVER_NAMESPACE and NOMAD_NAMESPACE.
    Default = default
` + tlsOptions

// parse parses args and reports the exit code to return when parsing
// failed (ok false).
func (m *meta) parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return exitOK, false
		}
		return exitError, false
	}
	return exitOK, true
}

// parseOne is parse for a command that takes exactly one argument; name
// ("<job>") says which in the usage error. It returns the argument, or ok
// false and the exit code to return.
func (m *meta) parseOne(fs *flag.FlagSet, args []string, name string) (arg string, code int, ok bool) {
	if code, ok := m.parse(fs, args); !ok {
		return "", code, false
	}
	if fs.NArg() != 1 {
		return "", m.usageError(fs, "This command takes one argument: %s", name), false
	}
	return fs.Arg(0), exitOK, true
}

// usageError prints a problem with the arguments and the usage.
func (m *meta) usageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(m.ui.Err, format+"\n", args...)
	fs.Usage()
	return exitError
}

func (m *meta) env(names ...string) string {
	getenv := m.ui.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// client builds the API client from flags, then environment, then defaults.
func (m *meta) client() *APIClient {
	addr := m.address
	if addr == "" {
		addr = m.env("DROVER_ADDR", "NOMAD_ADDR")
	}
	if addr == "" {
		addr = DefaultAddress
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	token := m.token
	if token == "" {
		token = m.env("DROVER_TOKEN", "NOMAD_TOKEN")
	}
	ns := m.namespace
	if ns == "" {
		ns = m.env("DROVER_NAMESPACE", "NOMAD_NAMESPACE")
	}
	return &APIClient{Address: addr, Token: token, Namespace: ns, HTTP: m.ui.HTTP, TLS: m.tlsOptions()}
}

// printJSON prints the API's answer at path, indented: what -json shows.
// what names the object in the error ("allocation", "jobs").
func (m *meta) printJSON(ctx context.Context, client *APIClient, path, what string) int {
	raw, err := client.GetRaw(ctx, path, nil)
	if err != nil {
		return m.ui.errorf("Error querying %s: %s", what, err)
	}
	m.ui.printf("%s\n", prettyJSON(raw))
	return exitOK
}

func (m *meta) now() time.Time {
	if m.ui.Now != nil {
		return m.ui.Now()
	}
	return time.Now()
}

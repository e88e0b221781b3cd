// Package cli is the plumbing every drover command shares: the UI a
// command writes to, the common API flags and the client they build,
// dispatch by command name, output formatting, reading input and spec
// files, lookup by ID prefix, evaluation monitoring and retries.
package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
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
	ExitOK               = 0
	ExitError            = 1
	exitPlacementFailure = 2
	ExitPlanError        = 255
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

func (u *UI) Printf(format string, args ...any) { fmt.Fprintf(u.Out, format, args...) }

// Errorf prints to the error stream and returns exitError, so that a
// command can `return ui.errorf(...)`.
func (u *UI) Errorf(format string, args ...any) int {
	fmt.Fprintf(u.Err, format, args...)
	if !strings.HasSuffix(format, "\n") {
		fmt.Fprintln(u.Err)
	}
	return ExitError
}

// Meta holds the flags every API command takes and builds its client.
type Meta struct {
	UI        *UI
	address   string
	token     string
	namespace string
	tls       TLSOptions
}

// FlagSet makes a command's FlagSet with the common API flags; usage is the
// command's help text, printed on -h and on a flag error.
func (m *Meta) FlagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(m.UI.Err)
	fs.Usage = func() { fmt.Fprintln(m.UI.Err, strings.TrimSpace(usage)+"\n"+generalOptions) }
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

// Parse parses args and reports the exit code to return when parsing
// failed (ok false).
func (m *Meta) Parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return ExitOK, false
		}
		return ExitError, false
	}
	return ExitOK, true
}

// ParseOne is parse for a command that takes exactly one argument; name
// ("<job>") says which in the usage error. It returns the argument, or ok
// false and the exit code to return.
func (m *Meta) ParseOne(fs *flag.FlagSet, args []string, name string) (arg string, code int, ok bool) {
	if code, ok := m.Parse(fs, args); !ok {
		return "", code, false
	}
	if fs.NArg() != 1 {
		return "", m.UsageError(fs, "This command takes one argument: %s", name), false
	}
	return fs.Arg(0), ExitOK, true
}

// ParseNone is Parse for a command that takes no argument, only flags.
func (m *Meta) ParseNone(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if code, ok := m.Parse(fs, args); !ok {
		return code, false
	}
	if fs.NArg() != 0 {
		return m.UsageError(fs, "This command takes no arguments"), false
	}
	return ExitOK, true
}

// UsageError prints a problem with the arguments and the usage.
func (m *Meta) UsageError(fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(m.UI.Err, format+"\n", args...)
	fs.Usage()
	return ExitError
}

func (m *Meta) env(names ...string) string {
	getenv := m.UI.Getenv
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

// Client builds the API client from flags, then environment, then defaults.
func (m *Meta) Client() *APIClient {
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
	return &APIClient{Address: addr, Token: token, Namespace: ns, HTTP: m.UI.HTTP, TLS: m.tlsOptions()}
}

// PrintJSON prints the API's answer at path, indented: what -json shows.
// what names the object in the error ("allocation", "jobs").
func (m *Meta) PrintJSON(ctx context.Context, client *APIClient, path, what string) int {
	raw, err := client.GetRaw(ctx, path, nil)
	if err != nil {
		return m.UI.Errorf("Error querying %s: %s", what, err)
	}
	m.UI.Printf("%s\n", PrettyJSON(raw))
	return ExitOK
}

func (m *Meta) Now() time.Time {
	if m.UI.Now != nil {
		return m.UI.Now()
	}
	return time.Now()
}

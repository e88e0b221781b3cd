package pluginhost

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// Config says which plugins a Host runs and how it supervises them.
type Config struct {
	// Logger is the parent of every plugin's logger (named after the
	// plugin); plugin stderr logs arrive through it. Default: hclog.Default().
	Logger hclog.Logger

	// SelfExe is the path of the drover binary. A built-in plugin runs as
	// `<SelfExe> __plugin <Name>` (ServeCommand): out of process, so a crash
	// in it cannot take the agent down, yet shipped inside the one binary.
	SelfExe string

	// Builtins are the plugins compiled into the drover binary, in the order
	// that decides job-type ties (see SchedulerSet).
	Builtins []Builtin

	// PluginDir holds third-party plugin binaries. Every executable file
	// in it (hidden files aside) is a plugin named after the file: a stanza
	// named N configures <PluginDir>/N, and a file no stanza names is loaded
	// without a config block (its schema's defaults), or skipped with a
	// warning when it turns out not to be a drover plugin (a plugin that
	// refuses its defaults is not skipped: that fails New). A stanza that names neither a file there nor a
	// built-in fails New. A missing directory fails New too.
	PluginDir string

	// Stanzas are the agent config's `plugin "<name>" { ... }` blocks, in
	// file order. This is a slice, not a map keyed by name, because config
	// order decides which plugin serves a job type two plugins declare.
	//
	// A stanza whose Name is a built-in's name configures that built-in
	// (as Nomad's `plugin "raw_exec" { config { ... } }` does) and launches no
	// binary. Every other stanza is a third-party plugin, launched after the
	// built-ins; it may therefore take over a built-in's job types.
	Stanzas []Stanza

	// Kinds are plugin kinds the host can dispense besides drover's own
	// (SchedulerKind, DriverKind, CSIBridgeKind, GCKind), which are always
	// registered. Build each with NewKind.
	Kinds []Kind

	// CallWait bounds how long a call waits for a plugin that is down
	// (crashed, restarting) before failing with ErrPluginUnavailable. Zero
	// fails at once. The caller's context can only shorten it. A worker
	// nacks its eval on that error, so a short wait that bridges a quick
	// restart saves a redelivery.
	CallWait time.Duration

	// Backoff paces restarts of a crashed plugin.
	Backoff Backoff

	// DrainTimeout bounds how long Reload waits for calls in flight on the
	// old instance before killing it anyway. Default: 30 s. Long-lived
	// calls made with Host.Watch are not waited for.
	DrainTimeout time.Duration

	// StartTimeout bounds the go-plugin handshake of one launch.
	// Default: go-plugin's (1 min).
	StartTimeout time.Duration

	// DiscoveryTimeout bounds the first launch of a plugin_dir file that
	// no stanza names: a file that is no drover plugin (or hangs in its
	// handshake) is skipped after at most this long, while the other
	// plugins start beside it. Default: DefaultDiscoveryTimeout (never
	// more than StartTimeout).
	DiscoveryTimeout time.Duration

	// UnansweredAfter is how long a scheduler's Schedule call may go
	// unanswered before the plugin is reported unhealthy; ProbeInterval is
	// how often each running plugin's health service is asked. Defaults:
	// DefaultUnansweredAfter, DefaultProbeInterval. See health.go.
	UnansweredAfter time.Duration
	ProbeInterval   time.Duration
}

// DefaultDiscoveryTimeout is Config.DiscoveryTimeout's default: a drover
// plugin completes its handshake in well under a second.
const DefaultDiscoveryTimeout = 5 * time.Second

// ServeCommand is the hidden drover subcommand that serves a built-in
// plugin: the host runs `<SelfExe> __plugin <Name>`. It is not a name a
// user types; `drover plugin …` is left to CSI plugins, as in Nomad.
const ServeCommand = "__plugin"

// Builtin is a plugin compiled into the drover binary.
type Builtin struct {
	// Name is passed as `drover __plugin <Name>` and names the plugin in logs,
	// in Status and in Dispense.
	Name string
	// Kind is the one kind the built-in serves (e.g. shared.KindScheduler).
	Kind string
	// Env is added to the plugin's environment (KEY=value). The agent needs
	// none; tests use it to make a re-executed test binary act as a plugin.
	Env []string

	// Lazy leaves the plugin idle at New: no process is launched until
	// something needs it, that is the first call of its kind that reaches
	// it (Clients.Call, Watch and Dispense, and the routers built on them:
	// a scheduler's first eval, a driver's first task, the first CSI or gc
	// call) or Host.Start. While idle it is listed by Status (Health
	// structs.AgentPluginIdle) with the declaration Declare gave, so its job
	// types are routed and its driver is known from the start. A lazy start
	// that fails fails the call that needed it (ErrPluginUnavailable) and
	// leaves the plugin idle; the next need tries again, not sooner than the
	// restart backoff. Once started, a lazy plugin is supervised as any
	// other (restarted when it crashes).
	//
	// Lazy takes effect only with a Declare, and only while the plugin's
	// stanza has no config block: a config is checked by a launch at
	// start, so a bad one fails the agent there and not at the first eval.
	Lazy bool
	// Declare gives a lazy built-in's declaration without a process: what
	// its kind's Init would return (a scheduler's *schedulerpb.InfoResponse,
	// a driver's *driverpb.InfoResponse, …), computed in the agent's process
	// from the same Go code the plugin serves (RegisterDeclaration). A
	// declaration of another type, or an error, makes New launch the
	// plugin at start instead.
	Declare func(ctx context.Context) (any, error)
	// Fingerprint, for a lazy driver plugin, answers the driver's
	// Fingerprint in process while the plugin is idle: cheap, without
	// starting it (raw_exec's own checks, run in process; for docker,
	// whether an engine answers on its socket). A nil answer has the call
	// start the plugin and go to it (docker, once its engine answers). Any
	// other driver call (a task) starts the plugin.
	Fingerprint func(ctx context.Context) *driverpb.FingerprintResponse
}

// Stanza is one `plugin "<Name>" { config { ... } args = [...] }` block.
type Stanza struct {
	Name string
	// Config is the body of the stanza's `config { ... }` block, as parsed
	// (HCL native or JSON syntax); nil when there is none. After every
	// launch it is decoded against the schema the plugin publishes
	// (Base.ConfigSchema) and the result handed to the plugin
	// (Base.SetConfig) before any call of its kind; see baseconfig.go. The
	// body keeps its source positions, so a refused field is reported at
	// its file:line:col.
	Config hcl.Body
	// Args are the third-party binary's command-line arguments.
	Args []string
}

// Backoff is an exponential restart delay: Initial, doubled after every
// failed or short-lived launch up to Max, and back to Initial once an
// instance has stayed up for ResetAfter.
type Backoff struct {
	Initial    time.Duration // default 100 ms
	Max        time.Duration // default 10 s
	ResetAfter time.Duration // default 30 s
}

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 10 * time.Second
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if b.ResetAfter <= 0 {
		b.ResetAfter = 30 * time.Second
	}
	return b
}

// next returns the delay before the launch that follows one delayed by d.
func (b Backoff) next(d time.Duration) time.Duration {
	if d <= 0 {
		return b.Initial
	}
	return min(2*d, b.Max)
}

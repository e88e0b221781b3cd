package conformance

import (
	"bytes"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// LaunchTimeout bounds a plugin's start, from exec to its handshake line.
const LaunchTimeout = 30 * time.Second

// Process is a plugin binary started by Start, as the agent starts one.
type Process struct {
	// Scheduler calls the plugin's scheduler service over its socket.
	Scheduler scheduler.Scheduler
	// Conn is the plugin's gRPC connection, for its other services (the
	// base service, gRPC health).
	Conn *grpc.ClientConn
	// Client is go-plugin's client of the process: Kill stops it as the
	// agent does (go-plugin's Shutdown, then SIGKILL if the process has not
	// exited within two seconds), ReattachConfig gives its socket and pid.
	Client *plugin.Client
}

// Launch runs the scheduler plugin binary cmd as the agent does and
// returns its scheduler, so the kit (Check, or Run with
// Options.InProcess) is driven against the real process over its real
// socket: the way to test a plugin written without drover's Go SDK, in
// any language.
//
//	func TestConformance(t *testing.T) {
//		s := conformance.Launch(t, exec.Command("./my-plugin"))
//		conformance.Run(t, s, conformance.Options{InProcess: true})
//	}
//
// The plugin is killed when t ends. See Start.
func Launch(t TB, cmd *exec.Cmd) scheduler.Scheduler {
	t.Helper()
	return Start(t, cmd).Scheduler
}

// Start runs the plugin binary cmd with go-plugin's client, with drover's
// handshake (the magic cookie in its environment, protocol version
// shared.ProtocolVersion, gRPC only, no TLS) and dial options, checks its
// gRPC health service, and dispenses its scheduler. cmd's Env, when set,
// is the plugin's whole environment (plus the handshake's variables);
// unset, the plugin inherits the test's. The plugin's stderr (its log
// lines) and go-plugin's own log go to t's log when t has a Logf method
// (*testing.T does). Any failure is fatal to t; the process is killed
// when t ends.
func Start(t TB, cmd *exec.Cmd) *Process {
	t.Helper()
	out := &lineLogger{}
	if l, ok := t.(interface{ Logf(string, ...any) }); ok {
		out.logf = l.Logf
	}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  shared.Handshake,
		Plugins:          plugin.PluginSet{shared.KindScheduler: &scheduler.Plugin{}},
		Cmd:              cmd,
		SkipHostEnv:      cmd.Env != nil,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		GRPCDialOptions:  shared.DialOptions(),
		StartTimeout:     LaunchTimeout,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:   "conformance.launch",
			Level:  hclog.Debug,
			Output: out,
		}),
	})
	// Kill waits for go-plugin's goroutines (the one copying the plugin's
	// stderr among them), so nothing logs to t after it ends.
	t.Cleanup(func() {
		client.Kill()
		out.stop()
	})
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("conformance: launch %s: %v", cmd.Path, err)
	}
	if err := rpc.Ping(); err != nil {
		t.Fatalf("conformance: %s does not answer gRPC health (grpc.health.v1.Health/Check for service %q): %v", cmd.Path, plugin.GRPCServiceName, err)
	}
	raw, err := rpc.Dispense(shared.KindScheduler)
	if err != nil {
		t.Fatalf("conformance: dispense the scheduler of %s: %v", cmd.Path, err)
	}
	p := &Process{Scheduler: raw.(scheduler.Scheduler), Client: client}
	if g, ok := rpc.(*plugin.GRPCClient); ok {
		p.Conn = g.Conn
	}
	return p
}

// lineLogger hands each complete line written to it to logf, until stop.
type lineLogger struct {
	mu      sync.Mutex
	logf    func(string, ...any)
	pending []byte
	stopped bool
}

var _ io.Writer = (*lineLogger)(nil)

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logf == nil || l.stopped {
		return len(p), nil
	}
	l.pending = append(l.pending, p...)
	for {
		i := bytes.IndexByte(l.pending, '\n')
		if i < 0 {
			break // an unterminated last line waits for the rest
		}
		l.logf("%s", l.pending[:i])
		l.pending = l.pending[i+1:]
	}
	return len(p), nil
}

// stop flushes what is left and drops whatever comes after: t's log is
// closed once the test ends.
func (l *lineLogger) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logf != nil && len(l.pending) > 0 {
		l.logf("%s", l.pending)
	}
	l.pending, l.stopped = nil, true
}

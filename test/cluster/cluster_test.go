package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// Deadlines are generous: the machine is small and shared, and a deadline
// only bounds a failure, never slows a pass.
const (
	// formTimeout bounds a cluster's formation: agents up, one leader
	// agreed on by every server, every node ready.
	formTimeout = 90 * time.Second
	// electionTimeout bounds a leader election after a server is lost.
	electionTimeout  = 30 * time.Second
	agentExitTimeout = 45 * time.Second
	// leftoverTimeout is how long processes may take to go away once
	// they were told to (or killed).
	leftoverTimeout = 15 * time.Second
	waitTimeout     = harness.WaitTimeout
	// logTail is how many lines of each agent log a failed test prints.
	logTail = 150
)

// options shape one cluster.
type options struct {
	clients int
	// heartbeatTTL and heartbeatGrace are the servers' min_heartbeat_ttl
	// and heartbeat_grace: a node is down this long (both added) after
	// its last heartbeat. Short by default so that a lost node shows fast.
	heartbeatTTL, heartbeatGrace string
	// serverExtra is added verbatim to every server's `server` block.
	serverExtra string
	// agentExtra is added verbatim at the top level of every agent's
	// config (a `tls` block).
	agentExtra string
	// clientDatacenters is the i-th client's datacenter (the agent's
	// default, dc1, past its end or when empty).
	clientDatacenters []string
}

func (o options) withDefaults() options {
	if o.heartbeatTTL == "" {
		o.heartbeatTTL = "2s"
	}
	if o.heartbeatGrace == "" {
		o.heartbeatGrace = "2s"
	}
	return o
}

// agent is one `drover agent -config` process of the cluster, across its
// restarts: the config file and the data dir stay, the process changes.
type agent struct {
	*harness.API
	c        *cluster
	Name     string
	IsServer bool
	HTTPPort int
	RPCPort  int // servers only
	DataDir  string
	config   string
	// datacenter is the agent's datacenter; empty: the default (dc1).
	datacenter string
	proc       *harness.Process // the current (or last) run
	runs       int
}

// RPCAddr is a server's RPC address, as /v1/status/leader names it.
func (a *agent) RPCAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.RPCPort)) }

// Running reports whether the agent's process runs.
func (a *agent) Running() bool { return a.proc != nil && a.proc.Running() }

// PID is the current process's pid.
func (a *agent) PID() int { return a.proc.PID() }

func (a *agent) String() string { return a.Name }

// cluster is three servers and opts.clients clients on loopback.
type cluster struct {
	t        *testing.T
	dir      string
	opts     options
	servers  []*agent
	clients  []*agent
	downOnce sync.Once
	// serverToken and clientToken are the join tokens of the first
	// server's cluster CA.
	serverToken, clientToken string
}

// readJoinTokens waits for the first server's API and reads both join
// tokens from it (GET /v1/operator/join-token/{role}).
func (c *cluster) readJoinTokens(first *agent, timeout time.Duration) error {
	var err error
	if c.serverToken, c.clientToken, err = first.JoinTokens(timeout, first.Running); err != nil {
		return fmt.Errorf("%s: %w", first, err)
	}
	return nil
}

// newCluster starts a cluster and waits until it has formed: one leader
// that every server agrees on, three voters, and every client's node
// ready. Free ports are found by listening and closing, so another process
// can take one before an agent listens: on that alone the whole cluster is
// started again on new ports.
func newCluster(t *testing.T, opts options) *cluster {
	t.Helper()
	needBinary(t)
	opts = opts.withDefaults()
	root := t.TempDir()
	for attempt := 1; ; attempt++ {
		c := &cluster{t: t, dir: filepath.Join(root, fmt.Sprintf("try-%d", attempt)), opts: opts}
		t.Cleanup(c.teardown)
		start := time.Now()
		err := c.form()
		if err == nil {
			t.Logf("cluster formed in %s", time.Since(start).Round(time.Millisecond))
			return c
		}
		if c.logsContain("address already in use") && attempt < 3 {
			c.teardown()
			t.Logf("cluster attempt %d: a port was taken; retrying on new ports", attempt)
			continue
		}
		t.Errorf("cluster did not form: %v", err)
		c.teardown() // prints the agents' logs
		t.FailNow()
	}
}

// form lays out the agents, starts them and waits for the cluster.
func (c *cluster) form() error {
	ports := harness.FreePorts(c.t, 3*2+c.opts.clients)
	var join []string
	for i := range 3 {
		a := c.newAgent(fmt.Sprintf("s%d", i+1), true, ports[2*i], ports[2*i+1])
		c.servers = append(c.servers, a)
		join = append(join, a.RPCAddr())
	}
	for i := range c.opts.clients {
		cl := c.newAgent(fmt.Sprintf("c%d", i+1), false, ports[6+i], 0)
		if i < len(c.opts.clientDatacenters) {
			cl.datacenter = c.opts.clientDatacenters[i]
		}
		c.clients = append(c.clients, cl)
	}
	// The default path of the cluster PKI: the first server creates the
	// cluster CA; the others join with the join tokens it shows.
	deadline := time.Now().Add(formTimeout)
	first := c.servers[0]
	if err := first.writeConfig(join, c.opts); err != nil {
		return err
	}
	if err := first.launch(); err != nil {
		return err
	}
	if err := c.readJoinTokens(first, time.Until(deadline)); err != nil {
		return err
	}
	for _, a := range c.all()[1:] {
		if err := a.writeConfig(join, c.opts); err != nil {
			return err
		}
		if err := a.launch(); err != nil {
			return err
		}
	}
	if _, err := c.pollLeader(time.Until(deadline)); err != nil {
		return err
	}
	for _, cl := range c.clients {
		if _, err := c.pollNodeReady(cl, time.Until(deadline)); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) newAgent(name string, server bool, httpPort, rpcPort int) *agent {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
	a := &agent{
		API: harness.NewAPI(c.t, addr, droverBin, repoRoot), c: c, Name: name, IsServer: server,
		HTTPPort: httpPort, RPCPort: rpcPort,
		DataDir: filepath.Join(c.dir, "data", name), config: filepath.Join(c.dir, name+".hcl"),
	}
	// A stopped agent's port stays closed: its requests are not retried.
	a.Alive = a.Running
	return a
}

func (c *cluster) all() []*agent { return append(append([]*agent{}, c.servers...), c.clients...) }

// rawExecStanza turns raw_exec on for the clients, which is off by default
// outside -dev, and lets its tasks run as root (they name no user), which
// is denied by default: the suite's tasks are its own.
const rawExecStanza = `
plugin "raw_exec" {
  config {
    enabled           = true
    denied_host_users = []
  }
}
`

// writeConfig writes the agent's HCL config file.
func (a *agent) writeConfig(join []string, opts options) error {
	if err := os.MkdirAll(filepath.Join(a.c.dir, "logs"), 0o755); err != nil {
		return err
	}
	quoted := make([]string, len(join))
	for i, j := range join {
		quoted[i] = strconv.Quote(j)
	}
	list := "[" + strings.Join(quoted, ", ") + "]"
	var b strings.Builder
	fmt.Fprintf(&b, "name      = %q\ndata_dir  = %q\nbind_addr = \"127.0.0.1\"\nlog_level = \"DEBUG\"\n\n", a.Name, a.DataDir)
	if a.datacenter != "" {
		fmt.Fprintf(&b, "datacenter = %q\n\n", a.datacenter)
	}
	b.WriteString(opts.agentExtra)
	if a.IsServer {
		fmt.Fprintf(&b, "ports {\n  http = %d\n  rpc  = %d\n}\n\n", a.HTTPPort, a.RPCPort)
		fmt.Fprintf(&b, `server {
  enabled           = true
  bootstrap_expect  = 3
  min_heartbeat_ttl = %q
  heartbeat_grace   = %q
%s
  server_join {
    retry_join     = %s
    retry_interval = "200ms"
%s  }
}
`, opts.heartbeatTTL, opts.heartbeatGrace, opts.serverExtra, list, tokenLine("token", a.c.serverToken))
	} else {
		fmt.Fprintf(&b, "ports {\n  http = %d\n}\n\nclient {\n  enabled = true\n  servers = %s\n%s}\n", a.HTTPPort, list, tokenLine("join_token", a.c.clientToken))
		b.WriteString(rawExecStanza)
	}
	return os.WriteFile(a.config, []byte(b.String()), 0o644)
}

// tokenLine is an HCL attribute line for a join token, or nothing (the
// first server, before any token exists).
func tokenLine(key, token string) string {
	if token == "" {
		return ""
	}
	return fmt.Sprintf("    %s = %q\n", key, token)
}

// launch starts a new run of the agent's process; it does not wait.
func (a *agent) launch() error {
	a.runs++
	log := filepath.Join(a.c.dir, "logs", fmt.Sprintf("%s-run%d.log", a.Name, a.runs))
	p, err := harness.Start(droverBin, []string{"agent", "-config", a.config}, log)
	if err != nil {
		return err
	}
	a.proc = p
	return nil
}

// restart starts the agent again from the same config and data dir and
// waits until its HTTP API answers. Callers wait for what they expect of
// it (rejoined, node ready).
func (a *agent) restart() {
	t := a.c.t
	t.Helper()
	if a.Running() {
		t.Fatalf("restart %s: it is still running", a)
	}
	if err := a.launch(); err != nil {
		t.Fatalf("restart %s: %v", a, err)
	}
	harness.WaitFor(t, formTimeout, a.Name+"'s HTTP API after a restart", func() (bool, string) {
		if !a.Running() {
			t.Fatalf("%s exited (%v) after its restart", a, a.proc.Cmd.ProcessState)
		}
		// With ACLs on and no token yet, the agent answers 403: it is up.
		status, err := a.Do(http.MethodGet, "/v1/agent/self", nil, nil)
		return err == nil && (status == http.StatusOK || status == http.StatusForbidden), fmt.Sprintf("status %d, %v", status, err)
	})
}

// stop ends the agent gracefully (SIGINT): it must exit 0 and take its
// plugins with it. A client's tasks and their shims stay by design: a
// restarted client recovers them.
func (a *agent) stop() {
	t := a.c.t
	t.Helper()
	plugins := children(a.PID())
	if _, err := a.proc.Stop(os.Interrupt, agentExitTimeout); err != nil {
		t.Errorf("graceful stop of %s: %v", a, err)
	}
	if left := waitGone(plugins); len(left) > 0 {
		t.Errorf("%s's plugins still run %s after it exited: %v", a, leftoverTimeout, left)
		harness.KillAll(left)
	}
	a.HTTP.CloseIdleConnections()
}

// crash is the loss of the agent's machine: the agent, its plugins, shims
// and tasks all die at once (SIGKILL). The agent goes first, so nothing
// new is started while the rest is killed.
func (a *agent) crash() {
	t := a.c.t
	t.Helper()
	tree := harness.Descendants(a.PID())
	a.proc.Kill()
	harness.KillAll(tree)
	tasks := harness.ProcsUnder(a.DataDir, droverBin)
	harness.KillAll(tasks)
	if left := waitGone(append(tree, tasks...)); len(left) > 0 {
		t.Fatalf("crash of %s: could not kill %v", a, left)
	}
	a.HTTP.CloseIdleConnections()
}

// children are the direct children of pid: an agent's plugins.
func children(pid int) []harness.Proc {
	var out []harness.Proc
	for _, p := range harness.ListProcs() {
		if p.PPID == pid && p.Alive() {
			out = append(out, p)
		}
	}
	return out
}

// waitGone waits up to leftoverTimeout for ps to end and returns those
// that did not.
func waitGone(ps []harness.Proc) []harness.Proc {
	var left []harness.Proc
	harness.Poll(leftoverTimeout, 50*time.Millisecond, func() (bool, string) {
		left = harness.StillAlive(ps)
		return len(left) == 0, ""
	})
	return left
}

// teardown stops every agent that runs (gracefully, all at once: a
// graceful stop that fails is a bug worth a failure), then kills whatever
// the cluster left: tasks and shims, which a non-dev client leaves by
// design, and anything else run from the test binary or found under the
// cluster's dir. Failed tests get the tail of every agent log.
func (c *cluster) teardown() {
	c.downOnce.Do(func() {
		var wg sync.WaitGroup
		for _, a := range c.all() {
			if a.Running() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a.stop()
				}()
			}
		}
		wg.Wait()
		left := harness.ProcsOf(droverBin)
		for _, p := range harness.ProcsUnder(c.dir, droverBin) {
			if !harness.ContainsPID(left, p.PID) {
				left = append(left, p)
			}
		}
		harness.KillAll(left)
		if still := waitGone(left); len(still) > 0 {
			c.t.Errorf("teardown: could not kill %v", still)
		}
		for _, a := range c.clients {
			harness.RemoveTaskCgroups(a.DataDir)
		}
		if c.t.Failed() {
			c.dumpLogs()
		}
	})
}

// dumpLogs prints the tail of every agent run's log.
func (c *cluster) dumpLogs() {
	paths, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
	sort.Strings(paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > logTail {
			lines = lines[len(lines)-logTail:]
		}
		c.t.Logf("--- tail of %s ---\n%s", filepath.Base(p), strings.Join(lines, "\n"))
	}
}

func (c *cluster) logsContain(s string) bool {
	paths, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s) {
			return true
		}
	}
	return false
}

// runningServers are the servers whose process runs.
func (c *cluster) runningServers() []*agent {
	var out []*agent
	for _, s := range c.servers {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

// serverAt is the server with that RPC address, or nil.
func (c *cluster) serverAt(rpcAddr string) *agent {
	for _, s := range c.servers {
		if s.RPCAddr() == rpcAddr {
			return s
		}
	}
	return nil
}

// leaderOf asks one server whom it takes for the leader ("" for none).
func leaderOf(a *agent) (string, error) {
	var leader string
	status, body, err := a.Raw(http.MethodGet, "/v1/status/leader", nil)
	switch {
	case err != nil:
		return "", err
	case status != http.StatusOK:
		return "", fmt.Errorf("status %d: %s", status, strings.TrimSpace(string(body)))
	}
	leader = strings.Trim(strings.TrimSpace(string(body)), `"`)
	return leader, nil
}

// errNoAgreement is pollLeader's answer when the servers did not settle.
var errNoAgreement = errors.New("servers do not agree on one leader")

// pollLeader waits until every running server names the same leader, a
// running server, and returns it.
func (c *cluster) pollLeader(timeout time.Duration) (*agent, error) {
	var leader *agent
	last, ok := harness.Poll(timeout, 100*time.Millisecond, func() (bool, string) {
		leader = nil
		seen := map[string]string{}
		var addr string
		for _, s := range c.runningServers() {
			l, err := leaderOf(s)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", s, err)
			}
			seen[s.Name] = l
			if addr == "" {
				addr = l
			}
			if l == "" || l != addr {
				return false, fmt.Sprintf("leaders seen: %v", seen)
			}
		}
		leader = c.serverAt(addr)
		if leader == nil || !leader.Running() {
			return false, fmt.Sprintf("leader %q is not a running server of this cluster", addr)
		}
		return true, ""
	})
	if !ok {
		return nil, fmt.Errorf("%w within %s: %s", errNoAgreement, timeout, last)
	}
	return leader, nil
}

// leader waits for the leader that every running server agrees on.
func (c *cluster) leader() *agent {
	c.t.Helper()
	l, err := c.pollLeader(electionTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return l
}

// followers are the running servers other than l.
func (c *cluster) followers(l *agent) []*agent {
	var out []*agent
	for _, s := range c.runningServers() {
		if s != l {
			out = append(out, s)
		}
	}
	return out
}

// pollNodeReady waits until the client's node is ready, eligible and its
// raw_exec driver healthy, and returns the node's ID.
func (c *cluster) pollNodeReady(cl *agent, timeout time.Duration) (string, error) {
	var id string
	last, ok := harness.Poll(timeout, 100*time.Millisecond, func() (bool, string) {
		if !cl.Running() {
			return false, fmt.Sprintf("%s is not running (%v)", cl, cl.proc.Cmd.ProcessState)
		}
		n, err := c.nodeNamed(cl.Name)
		if err != nil {
			return false, err.Error()
		}
		id = n.ID
		return n.Status == "ready" && n.SchedulingEligibility == "eligible" && n.Drivers["raw_exec"].Healthy,
			fmt.Sprintf("%+v", n)
	})
	if !ok {
		return "", fmt.Errorf("node of %s not ready within %s: %s", cl, timeout, last)
	}
	return id, nil
}

// waitNodeReady is pollNodeReady that fails the test.
func (c *cluster) waitNodeReady(cl *agent) string {
	c.t.Helper()
	id, err := c.pollNodeReady(cl, formTimeout)
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

// nodeNamed finds a node by name through any running server.
func (c *cluster) nodeNamed(name string) (harness.NodeStub, error) {
	var lastErr error = errors.New("no running server")
	for _, s := range c.runningServers() {
		var nodes []harness.NodeStub
		status, err := s.DoRetry(http.MethodGet, "/v1/nodes", nil, &nodes)
		if err != nil || status != http.StatusOK {
			lastErr = fmt.Errorf("GET /v1/nodes on %s: %d %v", s, status, err)
			continue
		}
		for _, n := range nodes {
			if n.Name == name {
				return n, nil
			}
		}
		return harness.NodeStub{}, fmt.Errorf("no node named %s in %+v", name, nodes)
	}
	return harness.NodeStub{}, lastErr
}

// nodeID is the ID of a client's node.
func (c *cluster) nodeID(cl *agent) string {
	c.t.Helper()
	n, err := c.nodeNamed(cl.Name)
	if err != nil {
		c.t.Fatal(err)
	}
	return n.ID
}

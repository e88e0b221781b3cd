package docker

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// Deadlines are generous: five agents and their plugins share a small,
// loaded machine, and a deadline only bounds a failure.
const (
	// formTimeout bounds a cluster's formation: containers up, one
	// leader that every server names, three voters, both nodes ready.
	formTimeout = 2 * time.Minute
	// electionTimeout bounds a leader election after a partition.
	electionTimeout = 45 * time.Second
	waitTimeout     = 90 * time.Second
	// requestTimeout bounds one HTTP request of the test: a server that
	// forwards to an unreachable leader must not hang the test.
	requestTimeout = 15 * time.Second
	// logTail is how many lines of each container's log a failed test
	// prints.
	logTail = 200

	httpPort = 4646
	rpcPort  = 4647
	// configPath is where each container finds its agent config, a
	// read-only bind mount of a file the test writes.
	configPath = "/etc/drover/agent.hcl"
)

// agent is one drover agent in a container of its own.
type agent struct {
	*harness.API
	c *cluster
	// Name is the agent's node name (the Raft ID of a server) and the
	// container's hostname: s1, c1, …
	Name string
	// Container is the container's name, which is also the agent's DNS
	// name on the cluster network: every address in the configs uses it.
	Container string
	IsServer  bool
	config    string // the host file mounted at configPath
	// dataDir is the agent's data_dir inside its container; with
	// dockerTasks, a client's is a host directory of the same path.
	dataDir string
	// ctlNet is the network that keeps a cut-off server's published port
	// (see isolate); "" while the agent is on the cluster network only.
	ctlNet string
}

// RPCAddr is the agent's RPC address as the cluster knows it.
func (a *agent) RPCAddr() string { return net.JoinHostPort(a.Container, strconv.Itoa(rpcPort)) }

func (a *agent) String() string { return a.Name }

// cluster is three servers and two client-only agents on a network of
// their own.
type cluster struct {
	t       *testing.T
	prefix  string // names every container and network of the cluster
	net     string // the cluster network
	dir     string // config files
	servers []*agent
	clients []*agent
	// clientsFirst is the server every client calls first: the leader
	// when the clients started.
	clientsFirst *agent

	mu       sync.Mutex
	networks []string // created networks, for teardown
	downOnce sync.Once
	// serverToken and clientToken are s1's join tokens.
	serverToken, clientToken string
	// dockerTasks gives the clients the host's Docker engine for their
	// docker driver (see newDockerTaskCluster).
	dockerTasks bool
}

// readJoinTokens waits for the first server's API and reads both join
// tokens (GET /v1/operator/join-token/{role}).
func (c *cluster) readJoinTokens(first *agent, timeout time.Duration) error {
	var err error
	if c.serverToken, c.clientToken, err = first.JoinTokens(timeout, nil); err != nil {
		return fmt.Errorf("%s: %w", first.Name, err)
	}
	return nil
}

// tokenLine is an HCL attribute line for a join token, or nothing (s1,
// which creates the cluster CA).
func tokenLine(key, token string) string {
	if token == "" {
		return ""
	}
	return fmt.Sprintf("    %s = %q\n", key, token)
}

// newCluster starts a cluster named after name and waits until it has
// formed. Everything it creates is removed when the test ends.
func newCluster(t *testing.T, name string) *cluster {
	t.Helper()
	return startCluster(t, name, false)
}

// newDockerTaskCluster is newCluster with clients that run docker tasks on
// the host's engine: each client container mounts the host's Docker socket,
// and its data dir is a host directory mounted at the same path, so that
// the alloc, task and secrets dirs the driver bind-mounts into a task's
// container name paths the engine (on the host) can see.
func newDockerTaskCluster(t *testing.T, name string) *cluster {
	t.Helper()
	return startCluster(t, name, true)
}

func startCluster(t *testing.T, name string, dockerTasks bool) *cluster {
	t.Helper()
	needDocker(t)
	c := &cluster{t: t, prefix: "drover-e2e-" + runID + "-" + name, dir: t.TempDir(), dockerTasks: dockerTasks}
	t.Cleanup(c.teardown)
	start := time.Now()
	if err := c.form(); err != nil {
		t.Fatalf("cluster did not form: %v", err)
	}
	t.Logf("cluster formed in %s", time.Since(start).Round(time.Millisecond))
	return c
}

func (c *cluster) form() error {
	c.net = c.prefix + "-net"
	if err := c.createNetwork(c.net); err != nil {
		return err
	}
	for i := range 3 {
		c.servers = append(c.servers, c.newAgent(fmt.Sprintf("s%d", i+1), true))
	}
	for i := range 2 {
		c.clients = append(c.clients, c.newAgent(fmt.Sprintf("c%d", i+1), false))
	}
	// The default path of the cluster PKI: s1 creates the cluster CA, the
	// other agents join with the join tokens it shows.
	deadline := time.Now().Add(formTimeout)
	for i, s := range c.servers {
		if err := s.writeConfig(c.servers); err != nil {
			return err
		}
		if err := s.start(); err != nil {
			return err
		}
		if i == 0 {
			if err := c.readJoinTokens(s, time.Until(deadline)); err != nil {
				return err
			}
		}
	}
	leader, _, err := c.pollLeader(c.servers, time.Until(deadline))
	if err != nil {
		return err
	}
	// Clients start once the servers have a leader, and call it first:
	// a client sticks to the server it reaches, so when the leader is cut
	// off every client has to fail over.
	c.clientsFirst = leader
	for i, cl := range c.clients {
		order := []*agent{leader}
		followers := without(c.servers, leader)
		for j := range followers {
			order = append(order, followers[(i+j)%len(followers)])
		}
		if err := cl.writeConfig(order); err != nil {
			return err
		}
		if err := cl.start(); err != nil {
			return err
		}
	}
	for _, cl := range c.clients {
		if _, err := c.pollNodeReady(cl, time.Until(deadline)); err != nil {
			return err
		}
	}
	return nil
}

func (c *cluster) newAgent(name string, server bool) *agent {
	a := &agent{c: c, Name: name, Container: c.prefix + "-" + name, IsServer: server,
		config: filepath.Join(c.dir, name+".hcl"), dataDir: "/var/lib/drover"}
	if c.dockerTasks && !server {
		a.dataDir = filepath.Join(c.dir, name+"-data")
	}
	a.API = harness.NewAPI(c.t, "", "", "")
	// One connection per request: a container's host port moves when its
	// networks change, and no idle connection outlives the test.
	a.HTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: requestTimeout}
	return a
}

func (c *cluster) all() []*agent { return append(append([]*agent{}, c.servers...), c.clients...) }

func (c *cluster) createNetwork(name string) error {
	if _, err := docker(append(append([]string{"network", "create"}, labelArgs(runID)...), name)...); err != nil {
		return err
	}
	c.mu.Lock()
	c.networks = append(c.networks, name)
	c.mu.Unlock()
	return nil
}

// writeConfig writes the agent's HCL: servers join the servers, clients
// call them in that order. Agents bind 0.0.0.0 and advertise their
// container name: nothing in a config is an IP address.
func (a *agent) writeConfig(servers []*agent) error {
	var join []string
	for _, s := range servers {
		join = append(join, strconv.Quote(s.RPCAddr()))
	}
	list := "[" + strings.Join(join, ", ") + "]"
	var b strings.Builder
	fmt.Fprintf(&b, "name      = %q\ndata_dir  = %q\nbind_addr = \"0.0.0.0\"\nlog_level = \"DEBUG\"\n\n", a.Name, a.dataDir)
	fmt.Fprintf(&b, "ports {\n  http = %d\n  rpc  = %d\n}\n\n", httpPort, rpcPort)
	if a.IsServer {
		fmt.Fprintf(&b, "advertise {\n  http = \"%s:%d\"\n  rpc  = %q\n}\n\n", a.Container, httpPort, a.RPCAddr())
		// Heartbeat timings are Nomad's defaults: a client whose server
		// vanished mid-call needs the gRPC keepalive (about 15 s) to
		// notice, and its node must not be lost meanwhile.
		fmt.Fprintf(&b, `server {
  enabled           = true
  bootstrap_expect  = 3
  min_heartbeat_ttl = "10s"
  heartbeat_grace   = "10s"

  server_join {
    retry_join     = %s
    retry_interval = "500ms"
%s  }
}
`, list, tokenLine("token", a.c.serverToken))
	} else {
		fmt.Fprintf(&b, "advertise {\n  http = \"%s:%d\"\n}\n\nclient {\n  enabled = true\n  servers = %s\n%s}\n", a.Container, httpPort, list, tokenLine("join_token", a.c.clientToken))
		// raw_exec is off by default outside -dev and denies root; the
		// suite's tasks run as the container's root. The container's
		// cgroup hierarchies are read-only, so its tasks run without
		// cgroups, as an operator of a containerised client would
		// configure it.
		b.WriteString("\nplugin \"raw_exec\" {\n  config {\n    enabled           = true\n    no_cgroups        = true\n    denied_host_users = []\n  }\n}\n")
		if a.c.dockerTasks {
			// The suite's image is the task image too, shared by every
			// client and removed by the suite: the driver must keep it.
			b.WriteString("\nplugin \"docker\" {\n  config {\n    gc {\n      image = false\n    }\n  }\n}\n")
		}
	}
	return os.WriteFile(a.config, []byte(b.String()), 0o644)
}

// start runs the agent's container and finds its published HTTP port.
func (a *agent) start() error {
	args := append([]string{"run", "-d"}, labelArgs(runID)...)
	args = append(args, "--network", a.c.net, "--name", a.Container, "--hostname", a.Name,
		"-p", fmt.Sprintf("127.0.0.1::%d", httpPort),
		"-v", a.config+":"+configPath+":ro")
	if a.c.dockerTasks && !a.IsServer {
		if err := os.MkdirAll(a.dataDir, 0o755); err != nil {
			return err
		}
		args = append(args, "-v", "/var/run/docker.sock:/var/run/docker.sock", "-v", a.dataDir+":"+a.dataDir)
	}
	args = append(args, image, "/bin/drover", "agent", "-config", configPath)
	if _, err := docker(args...); err != nil {
		return err
	}
	return a.refreshAddr()
}

// refreshAddr looks up the host port the agent's HTTP API is published on.
func (a *agent) refreshAddr() error {
	addr, err := hostPort(a.Container, httpPort)
	if err != nil {
		return err
	}
	a.Addr = addr
	return nil
}

// isolate cuts a server off the cluster network, as a network partition
// would: the other agents no longer reach it, nor it them. A container
// that leaves its only network loses its published ports, so the server is
// first put on a network of its own, which carries the port from then on
// and lets the test still talk to the server from the host.
func (c *cluster) isolate(a *agent) {
	c.t.Helper()
	a.ctlNet = c.prefix + "-xctl-" + a.Name
	if err := c.createNetwork(a.ctlNet); err != nil {
		c.t.Fatal(err)
	}
	if _, err := docker("network", "connect", a.ctlNet, a.Container); err != nil {
		c.t.Fatal(err)
	}
	if _, err := docker("network", "disconnect", c.net, a.Container); err != nil {
		c.t.Fatal(err)
	}
	c.waitAPI(a)
}

// heal puts an isolated server back on the cluster network and takes it off
// its own again, so the cluster looks as it did before the partition.
func (c *cluster) heal(a *agent) {
	c.t.Helper()
	if _, err := docker("network", "connect", c.net, a.Container); err != nil {
		c.t.Fatal(err)
	}
	if _, err := docker("network", "disconnect", a.ctlNet, a.Container); err != nil {
		c.t.Fatal(err)
	}
	a.ctlNet = ""
	c.waitAPI(a)
}

// waitAPI waits until the agent's HTTP API answers on its (possibly new)
// published port.
func (c *cluster) waitAPI(a *agent) {
	c.t.Helper()
	harness.WaitFor(c.t, waitTimeout, a.Name+"'s HTTP API on its published port", func() (bool, string) {
		if err := a.refreshAddr(); err != nil {
			return false, err.Error()
		}
		status, err := a.Do(http.MethodGet, "/v1/agent/self", nil, nil)
		return err == nil && status == http.StatusOK, fmt.Sprintf("%s: status %d, %v", a.Addr, status, err)
	})
}

// teardown removes the cluster's containers and networks. A failed test
// first gets the tail of every container's log.
func (c *cluster) teardown() {
	c.downOnce.Do(func() {
		var names []string
		for _, a := range c.all() {
			if c.t.Failed() {
				c.t.Logf("--- docker logs --tail %d %s (%s) ---\n%s", logTail, a.Container, a.Name, containerLogs(a.Container, logTail))
			}
			names = append(names, a.Container)
		}
		var errs []error
		if len(names) > 0 {
			if _, err := docker(append([]string{"rm", "-f", "-v"}, names...)...); err != nil && !strings.Contains(err.Error(), "No such container") {
				errs = append(errs, err)
			}
		}
		c.mu.Lock()
		nets := c.networks
		c.mu.Unlock()
		for _, n := range nets {
			if _, err := docker("network", "rm", n); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			c.t.Errorf("teardown: %v", err)
		}
	})
}

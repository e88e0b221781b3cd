package nodesim

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/internal/testwait"
	"github.com/drover-org/drover/plugins/builtin"
)

const pluginEnv = "DROVER_NODESIM_TEST_PLUGIN=1"

// TestMain lets the test binary serve the built-in plugins the server
// agent launches (its schedulers), the way `drover __plugin <name>` does.
func TestMain(m *testing.M) {
	if os.Getenv("DROVER_NODESIM_TEST_PLUGIN") != "" && len(os.Args) > 2 && os.Args[1] == pluginhost.ServeCommand {
		p, ok := builtin.Lookup(os.Args[2])
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown plugin %q\n", os.Args[2])
			os.Exit(1)
		}
		p.Serve()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// startServer starts a one-server cluster with the cluster PKI on (the
// server creates the CA and the join tokens) and a heartbeat TTL of ttl.
func startServer(t *testing.T, ttl time.Duration) (*agent.Agent, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rpcLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := rpcLn.Addr().(*net.TCPAddr).Port
	rpcLn.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg := &agent.Config{
		NodeName: "s1", Region: "global", Datacenter: "dc1", DataDir: filepath.Join(t.TempDir(), "s1"),
		BindAddr: "127.0.0.1", LogLevel: "ERROR",
		Ports:  &agent.Ports{HTTP: 0, RPC: port},
		Server: &agent.ServerConfig{Enabled: true, BootstrapExpect: 1},
	}
	a, err := agent.New(cfg, agent.Options{
		Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{pluginEnv},
		HeartbeatTTL: ttl,
	})
	if err != nil {
		ln.Close()
		t.Fatalf("start server: %v", err)
	}
	t.Cleanup(a.Shutdown)
	return a, addr
}

func testJob(id, typ string) *structs.Job {
	return &structs.Job{
		ID: id, Type: typ, Datacenters: []string{"dc*"},
		Constraints: []*structs.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
				Resources: &structs.Resources{CPU: 20, MemoryMB: 16}}},
		}},
	}
}

// countAllocs counts the job's allocations in status.
func countAllocs(s *server.Server, job, status string) int {
	allocs, _ := s.State().AllocsByJob(nil, "default", job, true)
	k := 0
	for _, a := range allocs {
		if a.ClientStatus == status {
			k++
		}
	}
	return k
}

// TestSimulatedNodes runs 50 simulated nodes against a one-server cluster
// through the real join, RPC and TLS path: every node registers and is
// ready, a sysbatch job completes on every node, a system job runs on
// every node, and no node is marked down while the nodes heartbeat.
func TestSimulatedNodes(t *testing.T) {
	testtier.Agent(t)
	const n = 50
	// A short TTL makes the nodes heartbeat several times during the
	// test; the server's grace (as long again) keeps a loaded machine
	// from marking a late one down.
	a, addr := startServer(t, 4*time.Second)
	s := a.Server()
	token, err := s.PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sim, err := Start(ctx, Config{
		Servers: []string{addr}, JoinToken: token, Nodes: n, LoopbackSources: true,
		RunDelay: 20 * time.Millisecond, CompleteDelay: 50 * time.Millisecond,
		CompleteTypes:    []string{"batch", "sysbatch"},
		StartConcurrency: 8,
	})
	if err != nil {
		t.Fatalf("start the simulation: %v", err)
	}
	defer sim.Stop()

	if st := sim.Stats(); st.Joined != n || st.Registered != n {
		t.Fatalf("after Start: %d joined, %d registered, want %d", st.Joined, st.Registered, n)
	}
	ids := map[string]bool{}
	for _, id := range sim.NodeIDs() {
		ids[id] = true
	}
	testwait.For(t, time.Minute, "every simulated node ready in the server's state", func() bool {
		nodes, _ := s.State().Nodes(nil)
		k := 0
		for _, nd := range nodes {
			if ids[nd.ID] && nd.Ready() && nd.Drivers["raw_exec"] != nil && nd.Drivers["raw_exec"].Healthy {
				k++
			}
		}
		return k == n
	})

	if _, err := s.Jobs().Register(ctx, testJob("sb", "sysbatch"), false, 0); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "the sysbatch job complete on every node", func() bool {
		return countAllocs(s, "sb", structs.AllocClientStatusComplete) == n
	})

	if _, err := s.Jobs().Register(ctx, testJob("sys", "system"), false, 0); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "the system job running on every node", func() bool {
		return countAllocs(s, "sys", structs.AllocClientStatusRunning) == n
	})

	// Every node heartbeats at least twice more (its interval is about
	// half the TTL), and none was marked down meanwhile.
	base := sim.Stats().Heartbeats
	testwait.For(t, time.Minute, "two more heartbeats of every node", func() bool {
		return sim.Stats().Heartbeats >= base+2*n
	})
	nodes, _ := s.State().Nodes(nil)
	for _, nd := range nodes {
		if !ids[nd.ID] {
			continue
		}
		if !nd.Ready() {
			t.Errorf("node %s is %s while heartbeating", nd.Name, nd.Status)
		}
		for _, ev := range nd.Events {
			if ev.Message == "Node heartbeat missed" {
				t.Errorf("node %s was marked down at %s while heartbeating", nd.Name, ev.Timestamp)
			}
		}
	}
	st := sim.Stats()
	if st.AllocsSeen != 2*n || st.Complete != n {
		t.Errorf("stats %+v: want %d allocs seen and %d complete", st, 2*n, n)
	}
	if st.Reregistered != 0 {
		t.Errorf("%d nodes had to register again", st.Reregistered)
	}
}

// TestConfigErrors: bad input is refused with the field named.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no servers", Config{Nodes: 1, JoinToken: "x"}, "Servers"},
		{"no nodes", Config{Servers: []string{"127.0.0.1:1"}, JoinToken: "x"}, "Nodes"},
		{"bad token", Config{Servers: []string{"127.0.0.1:1"}, Nodes: 1, JoinToken: "x"}, "JoinToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

package nodesim

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/internal/testwait"
)

// startThreeServers forms a three-server cluster as docs/pki.md says: s1
// creates the CA, s2 and s3 join with its server join token.
func startThreeServers(t *testing.T) ([]*agent.Agent, []string) {
	t.Helper()
	dir := t.TempDir()
	var ports []int
	var addrs []string
	for range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ports = append(ports, p)
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	}
	agents := make([]*agent.Agent, 3)
	token := ""
	for i := range 3 {
		name := fmt.Sprintf("s%d", i+1)
		cfg := &agent.Config{
			NodeName: name, Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, name),
			BindAddr: "127.0.0.1", LogLevel: "ERROR",
			Ports: &agent.Ports{HTTP: 0, RPC: ports[i]},
			Server: &agent.ServerConfig{Enabled: true, BootstrapExpect: 3,
				ServerJoin: &agent.ServerJoin{RetryJoin: addrs, RetryInterval: "100ms", Token: token}},
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(cfg, agent.Options{
			Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{pluginEnv},
			HeartbeatTTL: 10 * time.Second,
		})
		if err != nil {
			ln.Close()
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(a.Shutdown)
		agents[i] = a
		if i == 0 {
			if token, err = a.Server().PKI().JoinToken("server"); err != nil {
				t.Fatalf("s1's server join token: %v", err)
			}
		}
	}
	return agents, addrs
}

// TestNodesThroughFollower: client nodes that know only a follower join,
// register, heartbeat and report their allocations through it: the
// follower forwards a node's writes to the leader (they were refused as
// "forwarded to a server that does not lead", which sent every node
// hunting for the leader).
func TestNodesThroughFollower(t *testing.T) {
	testtier.Agent(t)
	const n = 3
	agents, addrs := startThreeServers(t)
	var leader *agent.Agent
	follower := -1
	testwait.For(t, time.Minute, "a leader that every server follows", func() bool {
		leader, follower = nil, -1
		for i, a := range agents {
			if a.Server().IsLeader() {
				leader = a
			} else if a.Server().LeaderAddr() != "" {
				follower = i
			}
		}
		if leader == nil || follower < 0 {
			return false
		}
		for _, a := range agents {
			if a.Server().LeaderAddr() != leader.Server().LeaderAddr() {
				return false
			}
		}
		// The follower holds the cluster CA (replicated through Raft), so
		// it can admit a node itself.
		_, err := agents[follower].Server().PKI().JoinToken("client")
		return err == nil
	})
	token, err := leader.Server().PKI().JoinToken("client")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sim, err := Start(ctx, Config{
		Servers: []string{addrs[follower]}, JoinToken: token, Nodes: n, LoopbackSources: true,
		RunDelay: 20 * time.Millisecond, CompleteDelay: 50 * time.Millisecond,
		CompleteTypes: []string{"batch", "sysbatch"},
	})
	if err != nil {
		t.Fatalf("start the simulation against follower %s: %v", addrs[follower], err)
	}
	defer sim.Stop()
	s := leader.Server()
	ids := map[string]bool{}
	for _, id := range sim.NodeIDs() {
		ids[id] = true
	}
	testwait.For(t, time.Minute, "every node ready in the leader's state", func() bool {
		nodes, _ := s.State().Nodes(nil)
		k := 0
		for _, nd := range nodes {
			if ids[nd.ID] && nd.Ready() {
				k++
			}
		}
		return k == n
	})
	if _, err := s.Jobs().Register(ctx, testJob("sb", "sysbatch"), false, 0); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "the sysbatch job complete on every node (reported through the follower)", func() bool {
		return countAllocs(s, "sb", structs.AllocClientStatusComplete) == n
	})
	if st := sim.Stats(); st.Reregistered != 0 {
		t.Errorf("%d nodes had to register again", st.Reregistered)
	}
}

package agent

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
)

// TestNomadHarnessConfigStartsServerOnly: the file Nomad's api test
// harness writes (JSON without extension; client { enabled = false },
// bootstrap_expect = 1, ports.serf, vault { enabled = false }) starts a
// lone server that elects itself, runs no client, and leads at the RPC
// port of the file.
func TestNomadHarnessConfigStartsServerOnly(t *testing.T) {
	testtier.Agent(t)
	dir := t.TempDir()
	rpcPort := freePort(t)
	src := fmt.Sprintf(`{"name":"node-1","data_dir":%q,"disable_update_check":true,"log_level":"ERROR",`+
		`"ports":{"http":%d,"rpc":%d,"serf":%d},"server":{"enabled":true,"bootstrap_expect":1},`+
		`"client":{"enabled":false},"vault":{"enabled":false},"acl":{"enabled":false}}`,
		filepath.Join(dir, "data"), freePort(t), rpcPort, freePort(t))
	path := filepath.Join(dir, "nomad4242")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(false, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startTestAgent(t, cfg, hclog.Warn)
	if a.Client() != nil {
		t.Fatal("client { enabled = false } started a client")
	}
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	api := &testAPI{t: t, base: "http://" + a.HTTPAddr(), http: &http.Client{Transport: transport, Timeout: testTimeout}}
	var leader string
	api.get("/v1/status/leader", &leader)
	if want := net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort)); leader != want {
		t.Fatalf("leader %q, want %q", leader, want)
	}
	var nodes []map[string]any
	api.get("/v1/nodes", &nodes)
	if len(nodes) != 0 {
		t.Fatalf("a server-only agent registered nodes: %v", nodes)
	}
}

// TestDevAgentJoinableOverRPC: -dev with ports.rpc set (here by a file,
// as `-dev -config` does) opens the RPC port, and a client-only agent
// joins the dev server through it; a dev agent without a chosen port
// opens none.
func TestDevAgentJoinableOverRPC(t *testing.T) {
	testtier.Agent(t)
	dir := t.TempDir()
	rpcPort := freePort(t)
	path := filepath.Join(dir, "dev.hcl")
	if err := os.WriteFile(path, []byte(fmt.Sprintf("bind_addr = \"127.0.0.1\"\nports {\n  rpc = %d\n}\n", rpcPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	devCfg, err := LoadConfig(true, path)
	if err != nil {
		t.Fatal(err)
	}
	dev := startTestAgent(t, devCfg, hclog.Warn)
	if dev.mux == nil {
		t.Fatal("dev agent with ports.rpc opened no RPC port")
	}
	off := false
	cli := startTestAgent(t, &Config{
		NodeName: "c1", Region: "global", Datacenter: "dc1", DataDir: filepath.Join(dir, "c1"), BindAddr: "127.0.0.1",
		LogLevel: "WARN", Ports: &Ports{RPC: freePort(t)},
		Client: &ClientConfig{Enabled: true, Servers: []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(rpcPort))}},
		TLS:    &TLSConfig{Auto: &off},
	}, hclog.Warn)
	waitFor(t, "the remote client's node to be ready on the dev server", func() (bool, string) {
		n, _ := dev.Server().State().NodeByID(nil, cli.Client().NodeID())
		if n == nil {
			return false, "no node"
		}
		return n.Status == structs.NodeStatusReady, n.Status
	})

	plain := startTestAgent(t, DevConfig(), hclog.Warn)
	if plain.mux != nil {
		t.Fatal("a dev agent without a chosen RPC port opened one")
	}
}

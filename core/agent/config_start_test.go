package agent

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/internal/testtier"
)

// TestAgentRefusesNumSchedulersAtStart: num_schedulers = 1000000 (which
// started a million scheduler workers, 2.3 GB in 12 s, and left the API
// dead) stops the agent before it starts anything, with the file:line:col
// and the rule: both the check the CLI runs after its flags and the
// agent's own start refuse it, and no scheduler worker ever runs.
func TestAgentRefusesNumSchedulersAtStart(t *testing.T) {
	testtier.Agent(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	path := filepath.Join(dir, "agent.hcl")
	writeFile(t, path, []byte("data_dir = \""+dataDir+"\"\nserver {\n  enabled = true\n  num_schedulers = 1000000\n}\n"), 0o600)
	want := path + ":4:20: server.num_schedulers: must be 0 (the default) or between 1 and 128 (got 1000000)"

	cfg, err := LoadConfig(false, path)
	if err != nil {
		t.Fatal(err)
	}
	// What `drover agent` runs before New; it exits 1 with this error.
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		// Stop here: starting this agent would start the million workers.
		t.Fatalf("Validate = %v, want %q", err, want)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a, err := New(cfg, Options{
		Logger:  hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &logs}),
		SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"},
	})
	if err == nil {
		a.Shutdown()
		t.Fatal("New started an agent with num_schedulers = 1000000")
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("New = %v, want %q", err, want)
	}
	buf := make([]byte, 4<<20)
	if stacks := buf[:runtime.Stack(buf, true)]; bytes.Contains(stacks, []byte("(*worker).run")) {
		t.Error("a scheduler worker is running after the refused start")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "server", "raft")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused start opened the server's Raft directory (stat: %v)", err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the refused start left the HTTP listener open")
	}
}

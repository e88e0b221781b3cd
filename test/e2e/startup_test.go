package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// failedStart is what a `drover agent` run that could not start left.
type failedStart struct {
	code    int
	output  string
	plugins []int // pids of the plugins it had started, from its log
}

// runFailingAgent runs `drover agent args...` with TMPDIR set to tmp and
// waits for it to exit by itself.
func runFailingAgent(t *testing.T, tmp string, args ...string) failedStart {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), agentExitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, append([]string{"agent"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("agent did not exit within %s; it must fail to start\n%s", agentExitTimeout, out.String())
	}
	fs := failedStart{output: out.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
		fs.code = 0
	case errors.As(err, &exit):
		fs.code = exit.ExitCode()
	default:
		t.Fatalf("run agent: %v", err)
	}
	for _, m := range regexp.MustCompile(`plugin loaded: .*\bpid=(\d+)`).FindAllStringSubmatch(fs.output, -1) {
		pid, _ := strconv.Atoi(m[1])
		fs.plugins = append(fs.plugins, pid)
	}
	return fs
}

// assertFailedCleanly checks the exit status, the error printed and that
// nothing is left: plugin processes, ports, files in TMPDIR.
func assertFailedCleanly(t *testing.T, fs failedStart, tmp string, ports []int, want ...string) {
	t.Helper()
	if fs.code != 1 {
		t.Errorf("exit status %d; want 1", fs.code)
	}
	if strings.Contains(fs.output, "panic:") || strings.Contains(fs.output, "fatal error:") {
		t.Errorf("the agent crashed instead of reporting its error")
	}
	if !strings.Contains(fs.output, "Error starting agent: ") {
		t.Errorf("no start-up error printed")
	}
	for _, w := range want {
		if !strings.Contains(fs.output, w) {
			t.Errorf("output does not say %q", w)
		}
	}
	for _, pid := range fs.plugins {
		if harness.PIDAlive(pid) {
			t.Errorf("plugin process %d outlived the failed agent", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d not free after the agent exited: %v", p, err)
			continue
		}
		_ = ln.Close()
	}
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
	if t.Failed() {
		t.Logf("--- agent output ---\n%s", fs.output)
	}
}

// A dev agent whose RPC port is taken says so, exits 1 and leaves neither
// its plugins, nor its HTTP port, nor its dev data dir behind. (The RPC
// port is bound once the plugins run; the HTTP port before them. A
// built-in with a config block launches at start rather than when first
// needed, so one plugin process runs when the bind fails.)
func TestAgentStartPortInUse(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "agent.hcl")
	if err := os.WriteFile(cfgFile, []byte("plugin \"scheduler-batch\" {\n  config {\n    max_attempts = 3\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	rpcPort := busy.Addr().(*net.TCPAddr).Port
	httpPort := harness.FreePorts(t, 1)[0]
	fs := runFailingAgent(t, tmp, "-dev", "-config", cfgFile, "-bind", "127.0.0.1", "-http-port", strconv.Itoa(httpPort), "-rpc-port", strconv.Itoa(rpcPort))
	if len(fs.plugins) == 0 {
		t.Errorf("no plugin was started before the failure; the test no longer covers their clean-up")
	}
	assertFailedCleanly(t, fs, tmp, []int{httpPort}, "rpc listener", "address already in use")
}

// A server whose raft.db is damaged or empty refuses to start, names the
// file and what to do, and leaves the file as it was.
func TestAgentStartRefusesBadRaftDB(t *testing.T) {
	t.Parallel()
	for name, content := range map[string][]byte{
		"garbage": bytes.Repeat([]byte("not bolt"), 8192),
		"empty":   {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, tmp := t.TempDir(), t.TempDir()
			ports := harness.FreePorts(t, 2)
			dataDir := filepath.Join(dir, "data")
			db := filepath.Join(dataDir, "server", "raft", "raft.db")
			if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(db, content, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := loneServerConfig(t, dataDir, ports, "client {\n  enabled = true\n}\n")
			fs := runFailingAgent(t, tmp, "-config", cfg)
			assertFailedCleanly(t, fs, tmp, ports, db, "refusing to start", "restore "+db+" from a backup")
			if now, err := os.ReadFile(db); err != nil || !bytes.Equal(now, content) {
				t.Errorf("raft.db changed by a start that refused it (%d bytes, was %d; %v)", len(now), len(content), err)
			}
		})
	}
}

// A plugin binary that is no plugin fails the start with go-plugin's
// complaint, and the process is killed, not left running.
func TestAgentStartBadPlugin(t *testing.T) {
	t.Parallel()
	dir, tmp := t.TempDir(), t.TempDir()
	pidFile := filepath.Join(dir, "impostor.pid")
	pluginDir := filepath.Join(dir, "plugins")
	if err := os.Mkdir(pluginDir, 0o700); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("#!/bin/sh\necho $$ > %s\necho hello there\nexec sleep 600\n", pidFile)
	if err := os.WriteFile(filepath.Join(pluginDir, "impostor"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ports := harness.FreePorts(t, 2)
	cfg := loneServerConfig(t, filepath.Join(dir, "data"), ports, fmt.Sprintf("plugin_dir = %q\nplugin \"impostor\" {}\n", pluginDir))
	fs := runFailingAgent(t, tmp, "-config", cfg)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the impostor never ran: %v\n%s", err, fs.output)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	fs.plugins = append(fs.plugins, pid)
	assertFailedCleanly(t, fs, tmp, ports, `launch plugin "impostor"`, "hello there")
}

// loneServerConfig writes the config of a one-server agent with its data
// in dataDir on the given HTTP and RPC ports; extra is appended as is.
func loneServerConfig(t *testing.T, dataDir string, ports []int, extra string) string {
	t.Helper()
	return harness.WriteFile(t, "server.hcl", fmt.Sprintf(`
data_dir  = %q
bind_addr = "127.0.0.1"
ports {
  http = %d
  rpc  = %d
}
server {
  enabled          = true
  bootstrap_expect = 1
}
`, dataDir, ports[0], ports[1])+extra)
}

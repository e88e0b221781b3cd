package agent

import (
	"net"
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/internal/testtier"
)

// startTestAgent starts an agent of cfg in process: HTTP on a free
// loopback listener, built-in plugins from this test binary. It is shut
// down when the test ends, and its log (at level) is printed if the test
// failed.
func startTestAgent(t *testing.T, cfg *Config, level hclog.Level) *Agent {
	t.Helper()
	testtier.Agent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	a, err := New(cfg, Options{
		Logger:  hclog.New(&hclog.LoggerOptions{Level: level, Output: logs}),
		SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"},
	})
	if err != nil {
		t.Fatalf("New: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		a.Shutdown()
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	})
	return a
}

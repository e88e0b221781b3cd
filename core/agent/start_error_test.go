package agent

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/internal/testtier"
)

// An agent whose HTTP port is taken fails to start with the listener's
// error, and stops the plugins it had started (TestMain's goleak check
// covers their goroutines), rather than panicking in its cleanup.
func TestNewFailsOnTakenHTTPPort(t *testing.T) {
	testtier.Agent(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP = taken.Addr().(*net.TCPAddr).Port
	cfg.Ports.RPC = freePort(t)
	a, err := New(cfg, Options{
		Logger:    hclog.NewNullLogger(),
		PluginEnv: []string{testPluginEnv + "=1"},
		SelfExe:   os.Args[0],
	})
	if err == nil {
		a.Shutdown()
		t.Fatalf("New on a taken HTTP port %d succeeded", cfg.Ports.HTTP)
	}
	if a != nil {
		t.Errorf("New returned an agent with its error %v", err)
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("New's error %q does not say the address is in use", err)
	}
}

package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/internal/testtier"
)

// unappliable is a committed entry no server can apply: a message type
// that does not exist, without the flag that lets a server skip it.
var unappliable = []byte{0x7f, 0x80}

// A server that meets a committed entry it cannot apply stops, and the
// agent ends with the error naming the entry's index (Done, which `drover
// agent` prints before exiting 1). Started again over the same log, the
// agent fails to start with the same error, promptly, rather than waiting
// out its leader wait and blaming the Raft peers.
func TestAgentStopsAtAnEntryItCannotApply(t *testing.T) {
	testtier.Agent(t)
	cfg := serverConfig(t, t.TempDir())
	cfg.Client = &ClientConfig{Enabled: false}
	logs := &lockedBuffer{}
	opts := Options{
		Logger:    hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
		SelfExe:   os.Args[0],
		PluginEnv: []string{testPluginEnv + "=1"},
	}
	defer func() {
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	}()
	a, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			a.Shutdown()
		}
	}()
	index, err := a.Server().ApplyUnchecked(unappliable, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"server stopped", "index " + strconv.FormatUint(index, 10), "unknown message type"}
	says := func(what string, err error) {
		t.Helper()
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v does not say %q", what, err, w)
			}
		}
	}
	select {
	case err := <-a.Done():
		says("running agent", err)
	case <-time.After(testTimeout):
		t.Fatalf("agent did not end within %s after a committed entry it cannot apply", testTimeout)
	}
	a.Shutdown()
	stopped = true

	// Restart over the same log: the entry is met again.
	cfg.Ports.HTTP = freePort(t)
	start := time.Now()
	b, err := New(cfg, opts)
	if err == nil {
		b.Shutdown()
		t.Fatal("an agent started over a log it cannot apply")
	}
	says("restart", err)
	if strings.Contains(err.Error(), "no cluster leader") {
		t.Errorf("restart blames the leader wait: %v", err)
	}
	if d := time.Since(start); d > defaultLeaderWait/2 {
		t.Errorf("restart took %s to fail", d)
	}
}

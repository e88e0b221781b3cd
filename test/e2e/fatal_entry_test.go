package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/drover-org/drover/test/internal/harness"
)

// A server whose Raft log holds a committed entry it cannot apply (here
// one of a message type that does not exist, as a corrupt log or a newer
// version would leave it) does not start: `drover agent` exits 1 with the
// error naming the entry's index, promptly, and leaves nothing running.
func TestAgentExitsOnAnEntryItCannotApply(t *testing.T) {
	t.Parallel()
	dir, tmp := t.TempDir(), t.TempDir()
	ports := harness.FreePorts(t, 2)
	dataDir := filepath.Join(dir, "data")
	cfg := loneServerConfig(t, dataDir, ports, "")

	// A first run leaves a real log behind.
	proc, err := harness.Start(droverBin, []string{"agent", "-config", cfg}, filepath.Join(dir, "first.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Kill()
	api := harness.NewAPI(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), droverBin, repoRoot)
	api.Alive = proc.Running
	deadline := time.Now().Add(agentReadyTimeout)
	for {
		var leader string
		if status, err := api.Do(http.MethodGet, "/v1/status/leader", nil, &leader); err == nil && status == http.StatusOK && leader != "" {
			break
		}
		if !proc.Running() || time.Now().After(deadline) {
			t.Fatalf("first run never had a leader\n%s", proc.Log())
		}
		select {
		case <-proc.Exited():
		case <-time.After(100 * time.Millisecond):
		}
	}
	api.HTTP.CloseIdleConnections()
	if graceful, err := proc.Stop(os.Interrupt, agentExitTimeout); err != nil || !graceful {
		t.Fatalf("first run did not stop cleanly (graceful %v): %v\n%s", graceful, err, proc.Log())
	}

	// Append the entry after the last one, in the last term: the restarted
	// leader commits it with its first entry of the new term.
	db := filepath.Join(dataDir, "server", "raft", "raft.db")
	store, err := raftboltdb.NewBoltStore(db)
	if err != nil {
		t.Fatal(err)
	}
	last, err := store.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var prev raft.Log
	if err := store.GetLog(last, &prev); err != nil {
		t.Fatal(err)
	}
	bad := &raft.Log{Index: last + 1, Term: prev.Term, Type: raft.LogCommand, Data: []byte{0x7f, 0x80}, AppendedAt: time.Now()}
	if err := store.StoreLog(bad); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	fs := runFailingAgent(t, tmp, "-config", cfg)
	assertFailedCleanly(t, fs, tmp, ports, "server stopped", "index "+strconv.FormatUint(bad.Index, 10), "unknown message type")
	if strings.Contains(fs.output, "no cluster leader") {
		t.Errorf("the error blames the leader wait")
	}
	if d := time.Since(start); d > agentExitTimeout/2 {
		t.Errorf("took %s to exit", d)
	}
}

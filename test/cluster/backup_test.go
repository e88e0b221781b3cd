package cluster

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// A backup round trip on a 3-server cluster with a running task: save a
// snapshot (CLI, against the leader), register a job after it, restore the
// snapshot through a follower (which passes it to the leader). Every
// server then holds the backup's state (the later job is gone, the
// running one is there), and the client keeps its running allocation.
func TestSnapshotSaveRestore(t *testing.T) {
	c := newCluster(t, options{clients: 1})
	before := c.runSleeper("keeper")
	node := c.nodeID(c.clients[0])
	alloc := before[node]
	l := c.leader()

	file := filepath.Join(t.TempDir(), "backup.snap")
	l.MustCLI("operator", "snapshot", "save", file)
	insp := l.MustCLI("operator", "snapshot", "inspect", file)
	for _, want := range []string{"Index", "Checksum   sha256:", "jobs", "allocs", "nodes"} {
		if !strings.Contains(insp.Stdout, want) {
			t.Fatalf("inspect output lacks %q:\n%s", want, insp.Stdout)
		}
	}
	register(l, fmt.Sprintf(fillerJob, "after-backup"))

	bad := l.CLI("operator", "snapshot", "restore", filepath.Join(t.TempDir(), "missing.snap"))
	if bad.Code == 0 {
		t.Fatalf("restoring a missing file succeeded:\n%s", bad)
	}

	f := c.followers(l)[0]
	f.MustCLI("operator", "snapshot", "restore", file)

	for _, s := range c.servers {
		harness.WaitFor(t, waitTimeout, "the backup's state on "+s.Name, func() (bool, string) {
			st, _, err := s.Raw(http.MethodGet, "/v1/job/after-backup?stale", nil)
			if err != nil || st != http.StatusNotFound {
				return false, fmt.Sprintf("after-backup: %d %v", st, err)
			}
			st, _, err = s.Raw(http.MethodGet, "/v1/job/keeper?stale", nil)
			if err != nil || st != http.StatusOK {
				return false, fmt.Sprintf("keeper: %d %v", st, err)
			}
			return true, ""
		})
	}
	harness.WaitFor(t, waitTimeout, "the running allocation kept", func() (bool, string) {
		var a harness.Alloc
		st, err := l.Do(http.MethodGet, "/v1/allocation/"+alloc.ID, nil, &a)
		if err != nil || st != http.StatusOK {
			return false, fmt.Sprintf("GET alloc: %d %v", st, err)
		}
		var n harness.Node
		l.MustGet("/v1/node/"+node, &n)
		return a.ClientStatus == "running" && n.Status == "ready", fmt.Sprintf("alloc %s, node %s", a.ClientStatus, n.Status)
	})
}

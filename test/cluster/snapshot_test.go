package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// compacted matches Raft's log line for a compaction, capturing the last
// index it removed.
var compacted = regexp.MustCompile(`compacting logs: from=\d+ to=(\d+)`)

// fillerJob is a parameterized job: registering it is one Raft write and
// starts nothing.
const fillerJob = `job %q {
  type        = "batch"
  datacenters = ["*"]

  parameterized {}

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }
    }
  }
}
`

// A follower that was down while the leader compacted its log past the
// follower's last entry catches up by installing the leader's snapshot,
// and then holds every job. Raft snapshots every few entries here so the
// compaction happens within the test.
func TestFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := newCluster(t, options{clients: 1, serverExtra: `
  raft_snapshot_threshold = 8
  raft_snapshot_interval  = "100ms"
  raft_trailing_logs      = 4
`})
	node := c.nodeID(c.clients[0])
	l := c.leader()
	down := c.followers(l)[0]
	down.crash()

	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("while-down-%d", i)
		register(l, fmt.Sprintf(trueJob, id))
		ids = append(ids, id)
	}
	for _, id := range ids {
		c.waitSysbatchDone(l, id, []string{node})
	}
	// The leader snapshots on its own schedule: wait until it compacted
	// its log past the first job registered while the follower was down
	// (its index is above everything the follower holds), or the
	// follower could still catch up from the log.
	written, err := jobIndexes(l, false)
	if err != nil {
		t.Fatal(err)
	}
	first := written[ids[0]]
	for _, id := range ids {
		first = min(first, written[id])
	}
	leaderLog := filepath.Join(c.dir, "logs", fmt.Sprintf("%s-run%d.log", l.Name, l.runs))
	fillers := 0
	harness.WaitFor(t, waitTimeout, fmt.Sprintf("%s to compact its log past index %d", l, first), func() (bool, string) {
		b, err := os.ReadFile(leaderLog)
		if err != nil {
			return false, err.Error()
		}
		var to uint64
		for _, m := range compacted.FindAllSubmatch(b, -1) {
			if n, err := strconv.ParseUint(string(m[1]), 10, 64); err == nil {
				to = max(to, n)
			}
		}
		if to < first {
			// Raft snapshots only once enough entries follow the last
			// snapshot; when the cluster has gone quiet, one more write
			// per poll (a parameterized job: no eval, no task) brings
			// the next one.
			fillers++
			register(l, fmt.Sprintf(fillerJob, fmt.Sprintf("filler-%d", fillers)))
		}
		return to >= first, fmt.Sprintf("compacted to %d after %d filler writes", to, fillers)
	})

	down.restart()
	c.waitRejoined(down)
	log := filepath.Join(c.dir, "logs", fmt.Sprintf("%s-run%d.log", down.Name, down.runs))
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "Installed remote snapshot") {
		t.Fatalf("%s caught up without installing a snapshot (log %s)", down, log)
	}
	jobs, err := jobIndexes(down, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, ok := jobs[id]; !ok {
			t.Errorf("job %s is missing on %s after it installed the snapshot", id, down)
		}
	}
}

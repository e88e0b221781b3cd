package cluster

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// `drover system gc` sent to a follower's HTTP API is forwarded to the
// leader, whose GC engine collects a finished sysbatch job with its
// evaluations and allocations. Once the followers have applied the GCReap
// entries, the job, its evaluations and its allocations are gone from every
// server's own state too; a running system job and its allocation stay.
func TestSystemGCThroughFollower(t *testing.T) {
	c := newCluster(t, options{clients: 1})
	l := c.leader()
	f := c.followers(l)[0]
	node := c.nodeID(c.clients[0])

	const done, kept = "gc-done", "gc-kept"
	register(l, fmt.Sprintf(trueJob, done))
	byNode := c.waitSysbatchDone(l, done, []string{node})
	allocID := byNode[node][0].ID
	harness.WaitFor(t, waitTimeout, done+" dead", func() (bool, string) {
		var j harness.Job
		status, err := l.DoRetry(http.MethodGet, "/v1/job/"+done, nil, &j)
		return err == nil && status == http.StatusOK && j.Status == "dead", fmt.Sprintf("%d %v %+v", status, err, j)
	})
	var evals []harness.Evaluation
	l.MustGet("/v1/job/"+done+"/evaluations", &evals)
	if len(evals) == 0 {
		t.Fatalf("%s has no evaluation", done)
	}
	register(l, fmt.Sprintf(sleeperJob, kept))
	var keptAlloc string
	harness.WaitFor(t, waitTimeout, kept+" running", func() (bool, string) {
		byNode, err := allocsByNode(l, kept)
		if err != nil {
			return false, err.Error()
		}
		if onePerNode(byNode, []string{node}, "running") {
			keptAlloc = byNode[node][0].ID
			return true, ""
		}
		return false, describeAllocs(byNode)
	})

	gone := []string{"/v1/job/" + done, "/v1/allocation/" + allocID}
	for _, e := range evals {
		gone = append(gone, "/v1/evaluation/"+e.ID)
	}
	for _, path := range gone {
		if status, err := l.DoRetry(http.MethodGet, path, nil, nil); err != nil || status != http.StatusOK {
			t.Fatalf("GET %s on the leader %s before system gc: %d %v", path, l, status, err)
		}
	}

	if out := f.MustCLI("system", "gc"); out.Stdout != "" {
		t.Errorf("system gc on follower %s printed %q, want nothing", f, out.Stdout)
	}

	// The leader's state answers at once: the GC ran before the command
	// returned.
	for _, path := range gone {
		if status, err := l.DoRetry(http.MethodGet, path, nil, nil); err != nil || status != http.StatusNotFound {
			t.Errorf("GET %s on the leader %s after system gc: %d %v, want 404", path, l, status, err)
		}
	}
	// Every server's own state, once it has applied the reap.
	for _, s := range c.servers {
		harness.WaitFor(t, waitTimeout, s.Name+" to apply the reap", func() (bool, string) {
			for _, path := range gone {
				status, err := s.DoRetry(http.MethodGet, path+"?stale", nil, nil)
				if err != nil || status != http.StatusNotFound {
					return false, fmt.Sprintf("GET %s?stale: %d %v", path, status, err)
				}
			}
			return true, ""
		})
		var j harness.Job
		if status, err := s.DoRetry(http.MethodGet, "/v1/job/"+kept+"?stale", nil, &j); err != nil || status != http.StatusOK || j.Status != "running" {
			t.Errorf("%s: the running system job after system gc: %d %v %+v", s, status, err, j)
		}
		var al harness.Alloc
		if status, err := s.DoRetry(http.MethodGet, "/v1/allocation/"+keptAlloc+"?stale", nil, &al); err != nil || status != http.StatusOK || al.ClientStatus != "running" {
			t.Errorf("%s: the running system job's alloc after system gc: %d %v %+v", s, status, err, al)
		}
	}
}

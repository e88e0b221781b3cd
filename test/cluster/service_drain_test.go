package cluster

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// migrateJob is a service job of four long-running allocations whose
// migrate block moves one at a time.
const migrateJob = `job %q {
  datacenters = ["*"]

  migrate {
    max_parallel     = 1
    health_check     = "task_states"
    min_healthy_time = "3s"
    healthy_deadline = "2m"
  }

  group "web" {
    count = 4

    task "sleep" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["600"]
      }

      kill_timeout = "2s"

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// drainAlloc is the part of an allocation the drain test reads.
type drainAlloc struct {
	ID, NodeID, Name            string
	DesiredStatus, ClientStatus string
	DesiredTransition           struct{ Migrate *bool }
	DeploymentStatus            *struct{ Healthy *bool }
	PreviousAllocation          string
}

// healthy reports whether the alloc's client reported it healthy.
func (a drainAlloc) healthy() bool {
	return a.DeploymentStatus != nil && a.DeploymentStatus.Healthy != nil && *a.DeploymentStatus.Healthy
}

// A client holding half of a service job's allocations is drained: its
// allocations move to the other client one at a time (migrate.max_parallel
// = 1) — sampled all along, never more than one of the drained node's
// allocations is on its way out without a healthy replacement (running
// for min_healthy_time, as its client reports per the migrate block) — the
// drain completes, and the four run on the other client, each replacing one
// of the drained node's and reported healthy.
func TestServiceDrainMigratesOneAtATime(t *testing.T) {
	c := newCluster(t, options{clients: 2})
	const id = "migrating"
	l := c.leader()
	l.MustCLI("job", "run", "-detach", harness.WriteFile(t, id+".hcl", fmt.Sprintf(migrateJob, id)))

	previous := map[string]string{} // alloc ID -> its PreviousAllocation, read once
	list := func() ([]drainAlloc, error) {
		var allocs []drainAlloc
		path := "/v1/job/" + harness.Escape(id) + "/allocations"
		if status, err := l.DoRetry(http.MethodGet, path, nil, &allocs); err != nil || status != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %v", path, status, err)
		}
		for i := range allocs {
			p, ok := previous[allocs[i].ID]
			if !ok {
				var full drainAlloc
				path := "/v1/allocation/" + allocs[i].ID
				if status, err := l.DoRetry(http.MethodGet, path, nil, &full); err != nil || status != http.StatusOK {
					return nil, fmt.Errorf("GET %s: %d %v", path, status, err)
				}
				p = full.PreviousAllocation
				previous[allocs[i].ID] = p
			}
			allocs[i].PreviousAllocation = p
		}
		return allocs, nil
	}
	describe := func(allocs []drainAlloc) string {
		var parts []string
		for _, al := range allocs {
			mig := ""
			if m := al.DesiredTransition.Migrate; m != nil && *m {
				mig = " migrate"
			}
			if al.healthy() {
				mig += " healthy"
			}
			parts = append(parts, fmt.Sprintf("%s %s@%.8s:%s/%s%s<-%s", al.Name, shortID(al.ID), al.NodeID,
				al.DesiredStatus, al.ClientStatus, mig, shortID(al.PreviousAllocation)))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}

	var before []drainAlloc
	harness.WaitFor(t, waitTimeout, "four allocations running", func() (bool, string) {
		allocs, err := list()
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, al := range allocs {
			if al.DesiredStatus == "run" && al.ClientStatus == "running" {
				running++
			}
		}
		before = allocs
		return len(allocs) == 4 && running == 4, describe(allocs)
	})
	perNode := map[string]int{}
	for _, al := range before {
		perNode[al.NodeID]++
	}
	drainedClient, keptClient := c.clients[0], c.clients[1]
	if perNode[c.nodeID(c.clients[1])] > perNode[c.nodeID(c.clients[0])] {
		drainedClient, keptClient = c.clients[1], c.clients[0]
	}
	drained, kept := c.nodeID(drainedClient), c.nodeID(keptClient)
	if perNode[drained] < 2 || perNode[kept] < 1 {
		t.Fatalf("the service job is not spread over both clients: %s", describe(before))
	}
	onDrained := map[string]bool{}
	for _, al := range before {
		if al.NodeID == drained {
			onDrained[al.ID] = true
		}
	}
	t.Logf("draining %s with %d of 4 allocations", drainedClient, len(onDrained))

	l.MustCLI("node", "drain", "-enable", "-yes", "-detach", drained)
	// Sampled often: a migration is in flight from its stop until its
	// replacement is healthy (3s after its task runs).
	maxInFlight := 0
	last, ok := harness.Poll(waitTimeout, 25*time.Millisecond, func() (bool, string) {
		allocs, err := list()
		if err != nil {
			return false, err.Error()
		}
		replacement := map[string]drainAlloc{}
		for _, al := range allocs {
			if al.PreviousAllocation != "" {
				replacement[al.PreviousAllocation] = al
			}
		}
		inFlight, runningKept := 0, 0
		for _, al := range allocs {
			// The drain marks every alloc of the node for migration at
			// once; the scheduler paces them by stopping max_parallel.
			if r := replacement[al.ID]; onDrained[al.ID] && al.DesiredStatus == "stop" && (r.ClientStatus != "running" || !r.healthy()) {
				inFlight++
			}
			if al.NodeID == kept && al.DesiredStatus == "run" && al.ClientStatus == "running" {
				runningKept++
			}
		}
		maxInFlight = max(maxInFlight, inFlight)
		if inFlight > 1 {
			t.Errorf("%d of the drained node's allocations migrating at once (max_parallel 1): %s", inFlight, describe(allocs))
		}
		var n harness.Node
		if status, err := l.DoRetry(http.MethodGet, "/v1/node/"+drained, nil, &n); err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("GET node: %d %v", status, err)
		}
		drainDone := (len(n.DrainStrategy) == 0 || string(n.DrainStrategy) == "null") && n.SchedulingEligibility == "ineligible"
		return drainDone && runningKept == 4 && inFlight == 0,
			fmt.Sprintf("drain strategy %s, eligibility %s, %d running on the kept node: %s", n.DrainStrategy, n.SchedulingEligibility, runningKept, describe(allocs))
	})
	if !ok {
		t.Fatalf("timed out after %s waiting for the drain to complete with four running on the other node; last seen: %s", waitTimeout, last)
	}
	if maxInFlight != 1 {
		t.Errorf("never saw a migration in flight (max %d); the sampling proved nothing", maxInFlight)
	}

	allocs, err := list()
	if err != nil {
		t.Fatal(err)
	}
	replaced := map[string]bool{}
	for _, al := range allocs {
		switch {
		case onDrained[al.ID]:
			if al.DesiredStatus != "stop" {
				t.Errorf("%s on the drained node is still wanted: %s", al.Name, describe(allocs))
			}
		case al.NodeID == drained:
			t.Errorf("%s placed on the draining node: %s", al.Name, describe(allocs))
		case onDrained[al.PreviousAllocation]:
			replaced[al.PreviousAllocation] = true
			if !al.healthy() {
				t.Errorf("replacement %s not reported healthy: %s", al.Name, describe(allocs))
			}
		}
	}
	if len(replaced) != len(onDrained) || len(allocs) != 4+len(onDrained) {
		t.Errorf("%d of %d drained allocations replaced, %d allocations; want one replacement each and nothing else: %s",
			len(replaced), len(onDrained), len(allocs), describe(allocs))
	}
}

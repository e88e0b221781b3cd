package cluster

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// serviceJob is a service job (no type: service is the default) of three
// long-running raw_exec allocations with a short reschedule delay, so a
// failure would be rescheduled within the test's deadlines.
const serviceJob = `job %q {
  datacenters = ["*"]

  group "web" {
    count = 3

    reschedule {
      delay          = "1s"
      delay_function = "constant"
      unlimited      = true
    }

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

// serviceAlloc is the part of an allocation this test reads. The list of
// GET /v1/job/:id/allocations carries no PreviousAllocation (Nomad's
// AllocListStub has none); GET /v1/allocation/:id does.
type serviceAlloc struct {
	ID, NodeID, Name            string
	DesiredStatus, ClientStatus string
	PreviousAllocation          string
}

func serviceAllocs(a *agent, jobID string) ([]serviceAlloc, error) {
	var allocs []serviceAlloc
	path := "/v1/job/" + harness.Escape(jobID) + "/allocations"
	status, err := a.DoRetry(http.MethodGet, path, nil, &allocs)
	if err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("GET %s on %s: %d %v", path, a, status, err)
	}
	return allocs, nil
}

// withPrevious fills the PreviousAllocation of the allocations not in
// known from GET /v1/allocation/:id.
func withPrevious(a *agent, allocs []serviceAlloc, known map[string]bool) error {
	for i := range allocs {
		if known[allocs[i].ID] {
			continue
		}
		path := "/v1/allocation/" + allocs[i].ID
		if status, err := a.DoRetry(http.MethodGet, path, nil, &allocs[i]); err != nil || status != http.StatusOK {
			return fmt.Errorf("GET %s on %s: %d %v", path, a, status, err)
		}
	}
	return nil
}

func describeServiceAllocs(allocs []serviceAlloc) string {
	parts := make([]string, 0, len(allocs))
	for _, al := range allocs {
		parts = append(parts, fmt.Sprintf("%s %s@%.8s:%s/%s<-%s", al.Name, shortID(al.ID), al.NodeID,
			al.DesiredStatus, al.ClientStatus, shortID(al.PreviousAllocation)))
	}
	sort.Strings(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

// A client holding most of a service job's allocations is lost (SIGKILL):
// once its node is down its allocations are marked lost, and the service
// scheduler replaces each on the surviving client — three running in all,
// each replacement chained to the lost allocation it replaces.
func TestServiceClientLoss(t *testing.T) {
	c := newCluster(t, options{clients: 2})
	const id = "web"
	l := c.leader()
	l.MustCLI("job", "run", harness.WriteFile(t, id+".hcl", fmt.Sprintf(serviceJob, id)))

	var before []serviceAlloc
	harness.WaitFor(t, waitTimeout, "three allocations running", func() (bool, string) {
		allocs, err := serviceAllocs(l, id)
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, al := range allocs {
			if al.ClientStatus == "running" {
				running++
			}
		}
		before = allocs
		return len(allocs) == 3 && running == 3, describeServiceAllocs(allocs)
	})
	perNode := map[string]int{}
	for _, al := range before {
		perNode[al.NodeID]++
	}
	lostClient, keptClient := c.clients[0], c.clients[1]
	if perNode[c.nodeID(c.clients[1])] > perNode[c.nodeID(c.clients[0])] {
		lostClient, keptClient = c.clients[1], c.clients[0]
	}
	lostNode, keptNode := c.nodeID(lostClient), c.nodeID(keptClient)
	lost, known := map[string]bool{}, map[string]bool{}
	for _, al := range before {
		known[al.ID] = true
		if al.NodeID == lostNode {
			lost[al.ID] = true
		}
	}
	if len(lost) == 0 {
		t.Fatalf("no allocation on the client to lose: %s", describeServiceAllocs(before))
	}
	t.Logf("losing %s with %d of 3 allocations", lostClient, len(lost))

	lostClient.crash()
	harness.WaitFor(t, waitTimeout, "lost allocations replaced on the surviving node", func() (bool, string) {
		allocs, err := serviceAllocs(l, id)
		if err == nil {
			err = withPrevious(l, allocs, known)
		}
		if err != nil {
			return false, err.Error()
		}
		running, replaced, marked := 0, map[string]bool{}, 0
		for _, al := range allocs {
			switch {
			case lost[al.ID]:
				if al.ClientStatus == "lost" && al.DesiredStatus == "stop" {
					marked++
				}
			case al.ClientStatus == "running":
				running++
				if lost[al.PreviousAllocation] && al.NodeID == keptNode {
					replaced[al.PreviousAllocation] = true
				}
			}
		}
		return marked == len(lost) && running == 3 && len(replaced) == len(lost), describeServiceAllocs(allocs)
	})
	// Nothing else moved: the surviving node's allocations of before run on.
	allocs, err := serviceAllocs(l, id)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]serviceAlloc{}
	for _, al := range allocs {
		byID[al.ID] = al
	}
	for _, al := range before {
		if al.NodeID == keptNode && byID[al.ID].ClientStatus != "running" {
			t.Errorf("allocation %s on the surviving node is %s; want it left running", shortID(al.ID), byID[al.ID].ClientStatus)
		}
	}
	if len(allocs) != 3+len(lost) {
		t.Errorf("%d allocations; want the 3 placed, plus one replacement per lost one: %s", len(allocs), describeServiceAllocs(allocs))
	}
}

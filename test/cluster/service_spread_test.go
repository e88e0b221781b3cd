package cluster

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// spreadJob is a service job of count %d spread over the node datacenters
// by percentages (%d%% in dc1, %d%% in dc2). Its update block sets
// max_parallel = 0: a changed spread replaces every allocation at once,
// without a deployment (Nomad's default update block would roll it one
// healthy allocation at a time, which this test does not look at).
const spreadJob = `job %q {
  datacenters = ["*"]

  update {
    max_parallel = 0
  }

  spread {
    attribute = "${node.datacenter}"
    weight    = 100

    target "dc1" {
      percent = %d
    }

    target "dc2" {
      percent = %d
    }
  }

  group "web" {
    count = %d

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

// A service job spread over two datacenters by percentages — one client in
// dc1, one in dc2 — is placed in those proportions, and keeps them when
// scaled.
func TestServiceSpreadByDatacenterPercent(t *testing.T) {
	c := newCluster(t, options{clients: 2, clientDatacenters: []string{"dc1", "dc2"}})
	l := c.leader()
	dcOf := map[string]string{}
	for _, cl := range c.clients {
		var n struct{ ID, Datacenter string }
		l.MustGet("/v1/node/"+c.nodeID(cl), &n)
		dcOf[n.ID] = n.Datacenter
	}
	if dcOf[c.nodeID(c.clients[0])] != "dc1" || dcOf[c.nodeID(c.clients[1])] != "dc2" {
		t.Fatalf("client datacenters %v, want c1 in dc1 and c2 in dc2", dcOf)
	}

	const id = "spread"
	cases := []struct {
		count, dc1Percent int
		want              map[string]int
	}{
		{4, 75, map[string]int{"dc1": 3, "dc2": 1}},
		{8, 75, map[string]int{"dc1": 6, "dc2": 2}},
		{10, 20, map[string]int{"dc1": 2, "dc2": 8}},
	}
	for _, tc := range cases {
		hcl := fmt.Sprintf(spreadJob, id, tc.dc1Percent, 100-tc.dc1Percent, tc.count)
		l.MustCLI("job", "run", "-detach", harness.WriteFile(t, id+".hcl", hcl))
		var perDC map[string]int
		harness.WaitFor(t, waitTimeout, fmt.Sprintf("%d allocs running, %v per datacenter", tc.count, tc.want), func() (bool, string) {
			allocs, err := serviceAllocs(l, id)
			if err != nil {
				return false, err.Error()
			}
			perDC = map[string]int{}
			running, wanted := 0, 0
			for _, al := range allocs {
				if al.DesiredStatus != "run" {
					continue
				}
				wanted++
				if al.ClientStatus == "running" {
					running++
					perDC[dcOf[al.NodeID]]++
				}
			}
			// Done placing: the spread is asserted below, so that a
			// wrong one fails at once with what was placed.
			return wanted == tc.count && running == tc.count, fmt.Sprintf("per datacenter %v: %s", perDC, describeServiceAllocs(allocs))
		})
		if perDC["dc1"] != tc.want["dc1"] || perDC["dc2"] != tc.want["dc2"] {
			allocs, _ := serviceAllocs(l, id)
			t.Errorf("count %d at %d%% dc1: running per datacenter %v, want %v: %s", tc.count, tc.dc1Percent, perDC, tc.want, describeServiceAllocs(allocs))
		}
	}
	var st struct{ Status string }
	if status, err := l.DoRetry(http.MethodGet, "/v1/job/"+id, nil, &st); err != nil || status != http.StatusOK || st.Status != "running" {
		t.Errorf("job status %q (%d %v), want running", st.Status, status, err)
	}
}

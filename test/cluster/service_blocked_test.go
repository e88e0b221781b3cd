package cluster

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// A service job constrained to dc2 while dc2's only client is ineligible
// is filtered off the other client: `drover job status` shows the
// placement failure as Nomad does, a blocked eval waits; once the dc2
// client is eligible again the blocked eval is released, the allocations
// run there, and the placement failure is gone from the status.
func TestServiceBlockedUntilNodeFits(t *testing.T) {
	c := newCluster(t, options{clients: 2, clientDatacenters: []string{"dc1", "dc2"}})
	l := c.leader()
	dc1, dc2 := c.nodeID(c.clients[0]), c.nodeID(c.clients[1])
	l.MustCLI("node", "eligibility", "-disable", dc2)

	const id = "fenced"
	hcl := strings.Replace(fmt.Sprintf(serviceJob, id), `  group "web" {`,
		"  constraint {\n    attribute = \"${node.datacenter}\"\n    value     = \"dc2\"\n  }\n\n  group \"web\" {", 1)
	l.MustCLI("job", "run", "-detach", harness.WriteFile(t, id+".hcl", hcl))

	type evalStub struct {
		ID, Status, BlockedEval string
		FailedTGAllocs          map[string]*struct {
			NodesEvaluated, NodesFiltered int
			ConstraintFiltered            map[string]int
		}
	}
	var blockedID string
	harness.WaitFor(t, waitTimeout, "a blocked eval and an eval explaining the failure", func() (bool, string) {
		var evals []evalStub
		if status, err := l.DoRetry(http.MethodGet, "/v1/job/"+id+"/evaluations", nil, &evals); err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("GET evaluations: %d %v", status, err)
		}
		var failed *evalStub
		blockedID = ""
		for i, ev := range evals {
			if ev.Status == "complete" && ev.FailedTGAllocs["web"] != nil {
				failed = &evals[i]
			}
			if ev.Status == "blocked" {
				blockedID = ev.ID
			}
		}
		if failed == nil || blockedID == "" {
			return false, fmt.Sprintf("%+v", evals)
		}
		m := failed.FailedTGAllocs["web"]
		if m.NodesEvaluated != 1 || m.NodesFiltered != 1 || m.ConstraintFiltered["${node.datacenter} = dc2"] != 1 || failed.BlockedEval != blockedID {
			t.Fatalf("failed placement %+v of eval %+v; want the one eligible node filtered by the constraint, naming blocked eval %s", m, failed, blockedID)
		}
		return true, ""
	})
	status := l.MustCLI("job", "status", id).Stdout
	pf := section(status, "Placement Failure")
	if len(pf) < 2 || pf[0] != `Task Group "web" (failed to place 3 allocations):` ||
		strings.TrimSpace(pf[1]) != `* Constraint "${node.datacenter} = dc2": 1 nodes excluded by filter` {
		t.Errorf("job status placement failure %q:\n%s", pf, status)
	}

	l.MustCLI("node", "eligibility", "-enable", dc2)
	harness.WaitFor(t, waitTimeout, "three allocations running on the dc2 node", func() (bool, string) {
		allocs, err := serviceAllocs(l, id)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, al := range allocs {
			if al.NodeID == dc1 {
				t.Fatalf("an allocation placed on the dc1 node: %s", describeServiceAllocs(allocs))
			}
			if al.NodeID == dc2 && al.DesiredStatus == "run" && al.ClientStatus == "running" {
				n++
			}
		}
		return n == 3 && len(allocs) == 3, describeServiceAllocs(allocs)
	})
	var ev struct{ Status string }
	l.MustGet("/v1/evaluation/"+blockedID, &ev)
	if ev.Status != "complete" {
		t.Errorf("the blocked eval is %q after the placement, want complete", ev.Status)
	}
	status = l.MustCLI("job", "status", id).Stdout
	if pf := section(status, "Placement Failure"); len(pf) != 0 {
		t.Errorf("job status still shows a placement failure once placed:\n%s", status)
	}
}

// section returns the lines of the CLI output's section titled title (up to
// the next blank line), without the title.
func section(out, title string) []string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if l != title {
			continue
		}
		var body []string
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" {
				break
			}
			body = append(body, l)
		}
		return body
	}
	return nil
}

package e2e

import (
	"fmt"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/test/internal/harness"
)

// A service job the dev agent's only node cannot take — too much memory,
// or a constraint no node meets — places nothing: its eval, read with
// nomad/api, explains why in FailedTGAllocs, a blocked eval waits for the
// cluster to change, and `drover job status` prints the placement failure
// the way Nomad does.
func TestServicePlacementFailureOnDevAgent(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	nc := a.nomadClient()
	cases := []struct {
		id       string
		edit     func(hcl string) string
		metric   func(m *nomadapi.AllocationMetric) bool
		wantLine string // in job status' Placement Failure section
	}{
		{
			id:   "e2e-svc-too-big",
			edit: func(h string) string { return strings.Replace(h, "memory = 16", "memory = 100000000", 1) },
			metric: func(m *nomadapi.AllocationMetric) bool {
				return m.NodesExhausted == 1 && m.DimensionExhausted["memory"] == 1
			},
			wantLine: `* Dimension "memory" exhausted on 1 nodes`,
		},
		{
			id: "e2e-svc-no-node",
			edit: func(h string) string {
				return strings.Replace(h, `  group "g" {`, "  constraint {\n    attribute = \"${meta.rack}\"\n    value     = \"r9\"\n  }\n\n  group \"g\" {", 1)
			},
			metric: func(m *nomadapi.AllocationMetric) bool {
				return m.NodesFiltered == 1 && len(m.ConstraintFiltered) == 1
			},
			wantLine: `* Constraint "${meta.rack} = r9": 1 nodes excluded by filter`,
		},
	}
	for _, c := range cases {
		hcl := c.edit(fmt.Sprintf(serviceJob, c.id, 2, "300"))
		if hcl == fmt.Sprintf(serviceJob, c.id, 2, "300") {
			t.Fatalf("%s: the job file no longer has what the case edits", c.id)
		}
		a.MustCLI("job", "run", "-detach", harness.WriteFile(t, c.id+".hcl", hcl))

		var failed, blocked *nomadapi.Evaluation
		harness.WaitFor(t, waitTimeout, c.id+": a complete eval with failed allocs and a blocked eval", func() (bool, string) {
			evals, _, err := nc.Jobs().Evaluations(c.id, nil)
			if err != nil {
				return false, err.Error()
			}
			failed, blocked = nil, nil
			var desc []string
			for _, ev := range evals {
				desc = append(desc, ev.ID[:8]+":"+ev.Status)
				if ev.Status == "complete" && len(ev.FailedTGAllocs) > 0 {
					failed = ev
				}
				if ev.Status == "blocked" {
					blocked = ev
				}
			}
			return failed != nil && blocked != nil, strings.Join(desc, " ")
		})
		m := failed.FailedTGAllocs["g"]
		if m == nil || m.NodesEvaluated != 1 || !c.metric(m) || m.CoalescedFailures != 1 {
			t.Errorf("%s: failed allocs of g = %+v; want both placements failed on the one node evaluated, explained", c.id, m)
		}
		if failed.BlockedEval != blocked.ID || blocked.PreviousEval != failed.ID || failed.QueuedAllocations["g"] != 2 {
			t.Errorf("%s: eval %s (blocked eval %q, queued %v) and blocked eval %s (previous %q) do not name each other",
				c.id, failed.ID, failed.BlockedEval, failed.QueuedAllocations, blocked.ID, blocked.PreviousEval)
		}
		if allocs := a.serviceAllocs(c.id); len(allocs) != 0 {
			t.Errorf("%s: %d allocs placed on a node that cannot take them", c.id, len(allocs))
		}

		out := a.MustCLI("job", "status", c.id).Stdout
		pf := section(out, "Placement Failure")
		if len(pf) == 0 || pf[0] != `Task Group "g" (failed to place 2 allocations):` {
			t.Errorf("%s: job status has no placement failure for g:\n%s", c.id, out)
		} else {
			found := false
			for _, l := range pf[1:] {
				found = found || strings.TrimSpace(l) == c.wantLine
			}
			if !found {
				t.Errorf("%s: placement failure %q lacks %q", c.id, pf, c.wantLine)
			}
		}
		if allocs := section(out, "Allocations"); len(allocs) != 1 || allocs[0] != "No allocations placed" {
			t.Errorf("%s: job status allocations %q, want none placed", c.id, allocs)
		}
	}
}

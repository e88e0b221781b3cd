package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// The read and node commands a user reaches for: plan, eval status, node
// status, eligibility, drain, and the -json form of each read.
func TestPlanEvalAndNodeCommands(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	nodeID := a.NodeID()

	// plan: a new job would create an allocation (exit 1) and nothing is
	// registered.
	plan := a.CLI("job", "plan", harness.WriteFile(t, "plan.hcl", fmt.Sprintf(sleeperJob, "e2e-plan")))
	if plan.Code != 1 || !strings.Contains(plan.Stdout, `+ Job: "e2e-plan"`) || !strings.Contains(plan.Stdout, "1 create") {
		t.Errorf("job plan of a new job: want exit 1, an added job and \"1 create\":\n%s", plan)
	}
	if status, err := a.Do(http.MethodGet, "/v1/job/e2e-plan", nil, nil); err != nil || status != http.StatusNotFound {
		t.Errorf("job plan registered the job: GET status %d, %v", status, err)
	}

	// eval status of a real evaluation.
	run := a.MustCLI("job", "run", "-detach", exampleJob("sysbatch.hcl"))
	m := regexp.MustCompile(`Evaluation ID: ([0-9a-f-]{36})`).FindStringSubmatch(run.Stdout)
	if m == nil {
		t.Fatalf("job run -detach printed no evaluation ID:\n%s", run)
	}
	evalID := m[1]
	harness.WaitFor(t, waitTimeout, "eval status to show the eval complete", func() (bool, string) {
		res := a.MustCLI("eval", "status", evalID[:8])
		status, _ := kvField(res.Stdout, "Status")
		job, _ := kvField(res.Stdout, "Job ID")
		return status == "complete" && job == "hello-sysbatch", res.Stdout
	})
	allocs := a.waitJobDead("hello-sysbatch")

	// node status lists the node as ready and eligible.
	nodeRow := func() map[string]string {
		for _, r := range harness.Table(strings.Split(strings.TrimSpace(a.MustCLI("node", "status").Stdout), "\n")) {
			if r["ID"] == nodeID[:8] {
				return r
			}
		}
		t.Fatalf("node status does not list %s", nodeID)
		return nil
	}
	if r := nodeRow(); r["Status"] != "ready" || r["Eligibility"] != "eligible" || r["Drain"] != "false" {
		t.Errorf("node status row = %v; want ready, eligible, not draining", r)
	}
	if s, _ := kvField(a.MustCLI("node", "status", nodeID[:8]).Stdout, "Status"); s != "ready" {
		t.Errorf("node status %s: Status = %q; want ready", nodeID[:8], s)
	}

	nodeState := func() node {
		var n node
		a.MustGet("/v1/node/"+nodeID, &n)
		return n
	}
	drained := func(n node) bool { return len(n.DrainStrategy) == 0 || string(n.DrainStrategy) == "null" }

	a.MustCLI("node", "eligibility", "-disable", nodeID)
	if n := nodeState(); n.SchedulingEligibility != "ineligible" {
		t.Errorf("after eligibility -disable: %+v", n)
	}
	if r := nodeRow(); r["Eligibility"] != "ineligible" {
		t.Errorf("node status row after -disable = %v", r)
	}
	a.MustCLI("node", "eligibility", "-enable", nodeID)
	if n := nodeState(); n.SchedulingEligibility != "eligible" {
		t.Errorf("after eligibility -enable: %+v", n)
	}

	// A drain with nothing to migrate completes at once; the command
	// follows it to the end. As in Nomad, a drained node stays ineligible
	// until the drain is disabled.
	drain := a.MustCLI("node", "drain", "-enable", "-yes", "-deadline", "1s", nodeID)
	if !strings.Contains(drain.Stdout, "drain strategy set") || !strings.Contains(drain.Stdout, "Drain complete") {
		t.Errorf("node drain -enable:\n%s", drain)
	}
	if n := nodeState(); !drained(n) || n.SchedulingEligibility != "ineligible" {
		t.Errorf("after the drain: strategy %s, eligibility %s; want none, ineligible", n.DrainStrategy, n.SchedulingEligibility)
	}
	if undrain := a.MustCLI("node", "drain", "-disable", "-yes", nodeID); !strings.Contains(undrain.Stdout, "drain strategy unset") {
		t.Errorf("node drain -disable:\n%s", undrain)
	}
	if n := nodeState(); !drained(n) || n.SchedulingEligibility != "eligible" || n.Status != "ready" {
		t.Errorf("after drain -disable: %+v; want no strategy, eligible, ready", n)
	}

	// Every read takes -json and prints the API's JSON.
	for _, tc := range []struct {
		args []string
		list bool   // a JSON array, else an object
		want string // a value the JSON must hold
	}{
		{[]string{"job", "status", "-json"}, true, "hello-sysbatch"},
		{[]string{"job", "status", "-json", "hello-sysbatch"}, false, "hello-sysbatch"},
		{[]string{"eval", "status", "-json", evalID[:8]}, false, evalID},
		{[]string{"eval", "list", "-json"}, true, evalID},
		{[]string{"alloc", "status", "-json", allocs[0].ID[:8]}, false, allocs[0].ID},
		{[]string{"node", "status", "-json"}, true, nodeID},
		{[]string{"node", "status", "-json", nodeID[:8]}, false, nodeID},
	} {
		name := strings.Join(tc.args, " ")
		out := a.MustCLI(tc.args...).Stdout
		var v any
		mustJSON(t, name, out, &v)
		_, isList := v.([]any)
		_, isObject := v.(map[string]any)
		if (tc.list && !isList) || (!tc.list && !isObject) || !strings.Contains(out, `"`+tc.want+`"`) {
			t.Errorf("%s: want a JSON %s holding %q:\n%s", name, map[bool]string{true: "array", false: "object"}[tc.list], tc.want, out)
		}
	}
}

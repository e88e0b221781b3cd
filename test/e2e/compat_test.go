package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// What Nomad's users see on the built binary: `job plan` of a changed task
// prints Nomad's field-level diff, `alloc stop` on a system job's alloc
// gets the node a replacement chained to it, and a job re-run after a purge
// does not chain to the purged job's allocs.
func TestNomadCompatPlanStopPurge(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-compat"
	jobFile := harness.WriteFile(t, "sleeper.hcl", fmt.Sprintf(sleeperJob, id))
	a.MustCLI("job", "run", "-detach", jobFile)
	live := func() (harness.Alloc, bool) {
		for _, al := range a.AllocsOf(id) {
			if al.DesiredStatus == "run" && al.ClientStatus == "running" {
				return al, true
			}
		}
		return harness.Alloc{}, false
	}
	var first harness.Alloc
	harness.WaitFor(t, waitTimeout, "the system alloc to run", func() (bool, string) {
		var ok bool
		first, ok = live()
		return ok, fmt.Sprintf("%+v", a.AllocsOf(id))
	})

	// plan: the changed argument, in its block, under its task and group.
	changed := harness.WriteFile(t, "sleeper2.hcl", strings.Replace(fmt.Sprintf(sleeperJob, id), "exec sleep 3600", "exec sleep 7200", 1))
	plan := a.CLI("job", "plan", changed)
	for _, want := range []string{
		`+/- Job: "` + id + `"`,
		`+/- Task Group: "sleeper" (1 create/destroy update)`,
		`  +/- Task: "sleep" (forces create/destroy update)`,
		`    +/- Config {`,
		`      +/- args[1]: "echo $$ > $NOMAD_ALLOC_DIR/pid; exec sleep 3600" => "echo $$ > $NOMAD_ALLOC_DIR/pid; exec sleep 7200"`,
	} {
		if !strings.Contains(plan.Stdout, want) {
			t.Errorf("job plan lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan.Stdout, `\"`) || plan.Code != 1 {
		t.Errorf("job plan: want exit 1 and no escaped JSON:\n%s", plan)
	}

	// alloc stop: replaced on the same node, chained to the stopped alloc.
	a.MustCLI("alloc", "stop", "-detach", first.ID)
	var next harness.Alloc
	harness.WaitFor(t, waitTimeout, "a replacement alloc running", func() (bool, string) {
		al, ok := live()
		next = al
		return ok && al.ID != first.ID, fmt.Sprintf("%+v", a.AllocsOf(id))
	})
	var full struct{ NodeID, PreviousAllocation, DesiredDescription string }
	a.MustGet("/v1/allocation/"+next.ID, &full)
	if full.NodeID != first.NodeID || full.PreviousAllocation != first.ID {
		t.Errorf("replacement on %s chained to %q; want node %s and %s", full.NodeID, full.PreviousAllocation, first.NodeID, first.ID)
	}
	a.MustGet("/v1/allocation/"+first.ID, &full)
	if full.DesiredDescription == "alloc not needed as node is tainted" {
		t.Errorf("stopped alloc says the ready node is tainted")
	}

	// stop -purge, run again: a fresh alloc with no previous allocation.
	a.MustCLI("job", "stop", "-purge", "-detach", id)
	harness.WaitFor(t, waitTimeout, "the purge", func() (bool, string) {
		status, err := a.Do(http.MethodGet, "/v1/job/"+id, nil, nil)
		return err == nil && status == http.StatusNotFound, fmt.Sprint(status, err)
	})
	old := map[string]bool{}
	for _, al := range a.AllocsOf(id) {
		old[al.ID] = true
	}
	a.MustCLI("job", "run", "-detach", jobFile)
	var fresh harness.Alloc
	harness.WaitFor(t, waitTimeout, "the new job's alloc", func() (bool, string) {
		al, ok := live()
		fresh = al
		return ok && !old[al.ID], fmt.Sprintf("%+v", a.AllocsOf(id))
	})
	full.PreviousAllocation = ""
	a.MustGet("/v1/allocation/"+fresh.ID, &full)
	if full.PreviousAllocation != "" {
		t.Errorf("the re-run job's alloc names %q, of the purged job, as its previous allocation", full.PreviousAllocation)
	}
}

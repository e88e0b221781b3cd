package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// sleepJob is a job of type %q whose group "g" runs `sleep 300` count
// times; format it with the job ID, the type and the count.
const sleepJob = `job %q {
  type        = %q
  datacenters = ["*"]

  group "g" {
    count = %d

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["300"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// scaleStatus is the part of GET /v1/job/:id/scale the test reads.
type scaleStatus struct {
	JobModifyIndex uint64
	TaskGroups     map[string]struct {
		Desired, Placed, Running int
		Events                   []struct {
			Count         *int64
			PreviousCount int64
			Message       string
			EvalID        *string
		}
	}
}

// waitAllocs waits until the job has `running` running allocations that
// the scheduler wants and `stopped` it stopped.
func waitAllocs(t *testing.T, a *testAgent, jobID string, running, stopped int) {
	t.Helper()
	harness.WaitFor(t, waitTimeout, fmt.Sprintf("%s: %d running, %d stopped", jobID, running, stopped), func() (bool, string) {
		var r, s int
		var states []string
		for _, al := range a.AllocsOf(jobID) {
			states = append(states, al.Name+":"+al.DesiredStatus+"/"+al.ClientStatus)
			switch {
			case al.DesiredStatus == "run" && al.ClientStatus == "running":
				r++
			case al.DesiredStatus == "stop":
				s++
			}
		}
		return r == running && s == stopped, strings.Join(states, " ")
	})
}

// A user scales a running batch job from 1 to 3 with the CLI and reverts
// it to its first version: three allocations run, then one, the other two
// stopped. A sysbatch job, placed on every node, refuses to be scaled.
func TestScaleAndRevertOnDevAgent(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-scale"

	a.MustCLI("job", "run", harness.WriteFile(t, "scale.hcl", fmt.Sprintf(sleepJob, id, "batch", 1)))
	waitAllocs(t, a, id, 1, 0)

	scale := a.MustCLI("job", "scale", id, "3")
	if !strings.Contains(scale.Stdout, `finished with status "complete"`) {
		t.Errorf("job scale did not monitor the eval to completion:\n%s", scale)
	}
	waitAllocs(t, a, id, 3, 0)

	var st scaleStatus
	a.MustGet("/v1/job/"+id+"/scale", &st)
	g := st.TaskGroups["g"]
	if g.Desired != 3 || g.Placed != 3 || g.Running != 3 || len(g.Events) != 1 {
		t.Fatalf("scale status %+v, want desired/placed/running 3 and one event", g)
	}
	if ev := g.Events[0]; ev.Count == nil || *ev.Count != 3 || ev.PreviousCount != 1 || ev.EvalID == nil || ev.Message == "" {
		t.Errorf("scaling event %+v, want count 3 from 1 with its eval", ev)
	}
	var v1 struct{ Version uint64 }
	a.MustGet("/v1/job/"+id, &v1)
	if v1.Version != 1 {
		t.Errorf("job version after scale %d, want 1", v1.Version)
	}

	revert := a.MustCLI("job", "revert", id, "0")
	if !strings.Contains(revert.Stdout, `finished with status "complete"`) {
		t.Errorf("job revert did not monitor the eval to completion:\n%s", revert)
	}
	waitAllocs(t, a, id, 1, 2)
	var v2 struct {
		Version    uint64
		TaskGroups []struct{ Count int }
	}
	a.MustGet("/v1/job/"+id, &v2)
	if v2.Version != 2 || len(v2.TaskGroups) != 1 || v2.TaskGroups[0].Count != 1 {
		t.Errorf("job after revert %+v, want version 2 with count 1", v2)
	}
	if res := a.CLI("job", "revert", id, "2"); res.Code != 1 || !strings.Contains(res.Stderr, "can't revert to the current version 2") {
		t.Errorf("revert to the current version:\n%s", res)
	}

	const sb = "e2e-scale-sysbatch"
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "sb.hcl", fmt.Sprintf(sleepJob, sb, "sysbatch", 1)))
	res := a.CLI("job", "scale", sb, "g", "2")
	if res.Code != 1 || !strings.Contains(res.Stderr, "400") || !strings.Contains(res.Stderr, "per_node") {
		t.Errorf("scaling a sysbatch job:\n%s\nwant exit 1 with a 400 naming per_node", res)
	}
	status, body, err := a.Raw(http.MethodPut, "/v1/job/"+sb+"/scale", map[string]any{"Count": 2, "Target": map[string]string{"Group": "g"}})
	if err != nil || status != http.StatusBadRequest || !strings.Contains(string(body), "per_node") {
		t.Errorf("PUT scale of the sysbatch job: %d %s %v, want a 400 naming per_node", status, body, err)
	}

	a.MustCLI("job", "stop", "-purge", "-detach", id)
	a.MustCLI("job", "stop", "-purge", "-detach", sb)
}

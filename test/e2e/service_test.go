package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// serviceJob is a job file with no type — a service job — of one group of
// long-running raw_exec sleeps, rolled two at a time. Format it with the
// job ID (%q), the count and the sleep's argument.
const serviceJob = `job %q {
  datacenters = ["*"]

  update {
    max_parallel     = 2
    min_healthy_time = "1s"
  }

  group "g" {
    count = %d

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = [%q]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// serviceAlloc is what the test reads of an alloc list entry.
type serviceAlloc struct {
	ID, EvalID, Name            string
	JobVersion                  uint64
	DesiredStatus, ClientStatus string
}

func (a *testAgent) serviceAllocs(jobID string) []serviceAlloc {
	a.t.Helper()
	var out []serviceAlloc
	if status, err := a.Do(http.MethodGet, "/v1/job/"+harness.Escape(jobID)+"/allocations", nil, &out); err != nil || status != http.StatusOK {
		a.t.Fatalf("GET allocations of %s: %d %v", jobID, status, err)
	}
	return out
}

// waitServiceRunning waits until exactly n allocs of the job are wanted,
// each running at job version version, and returns them.
func (a *testAgent) waitServiceRunning(jobID string, n int, version uint64) []serviceAlloc {
	a.t.Helper()
	var running []serviceAlloc
	harness.WaitFor(a.t, waitTimeout, fmt.Sprintf("%d allocs of %s running at version %d", n, jobID, version), func() (bool, string) {
		running = running[:0]
		var desc []string
		wanted := 0
		for _, al := range a.serviceAllocs(jobID) {
			desc = append(desc, fmt.Sprintf("%s v%d %s/%s", al.Name, al.JobVersion, al.DesiredStatus, al.ClientStatus))
			if al.DesiredStatus != "run" {
				continue
			}
			wanted++
			if al.ClientStatus == "running" && al.JobVersion == version {
				running = append(running, al)
			}
		}
		return wanted == n && len(running) == n, strings.Join(desc, "; ")
	})
	return running
}

// A user runs a job file without a type on the dev agent: the service
// plugin keeps its count running, scales it, rolls a changed task two at a
// time, and stops it.
func TestServiceLifecycle(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-service"
	run := func(count int, arg string) {
		a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "service.hcl", fmt.Sprintf(serviceJob, id, count, arg)))
	}

	run(3, "300")
	first := a.waitServiceRunning(id, 3, 0)
	var j job
	mustJSON(t, "job status -json", a.MustCLI("job", "status", "-json", id).Stdout, &j)
	if j.Type != "service" {
		t.Errorf("job type = %q, want service (the default)", j.Type)
	}

	// A count change alone updates the three in place and places two.
	run(5, "300")
	scaled := a.waitServiceRunning(id, 5, 1)
	kept := map[string]bool{}
	for _, al := range scaled {
		kept[al.ID] = true
	}
	for _, al := range first {
		if !kept[al.ID] {
			t.Errorf("alloc %s (%s) was replaced by a count change; want an in-place update", al.ID, al.Name)
		}
	}

	// A changed task config replaces every alloc, at most max_parallel (2)
	// per evaluation: each new alloc's eval placed at most two.
	run(5, "301")
	rolled := a.waitServiceRunning(id, 5, 2)
	perEval := map[string]int{}
	for _, al := range rolled {
		if kept[al.ID] {
			t.Errorf("alloc %s (%s) survived a destructive change", al.ID, al.Name)
		}
		perEval[al.EvalID]++
	}
	t.Logf("replacements per eval: %v", perEval)
	for ev, n := range perEval {
		if n > 2 {
			t.Errorf("eval %s replaced %d allocs; update.max_parallel is 2", ev, n)
		}
	}
	if len(perEval) < 3 {
		t.Errorf("5 allocs replaced by %d evals; with max_parallel 2 it takes at least 3: %v", len(perEval), perEval)
	}
	for _, al := range a.serviceAllocs(id) {
		if al.JobVersion < 2 && al.DesiredStatus == "run" {
			t.Errorf("old alloc %s (%s, v%d) still wanted after the rollout", al.ID, al.Name, al.JobVersion)
		}
	}

	// Stopping the job stops every alloc.
	a.MustCLI("job", "stop", "-detach", id)
	harness.WaitFor(t, waitTimeout, "every alloc of the stopped job to stop", func() (bool, string) {
		var desc []string
		done := true
		for _, al := range a.serviceAllocs(id) {
			desc = append(desc, fmt.Sprintf("%s %s/%s", al.Name, al.DesiredStatus, al.ClientStatus))
			done = done && al.DesiredStatus != "run" && al.ClientStatus != "running" && al.ClientStatus != "pending"
		}
		return done, strings.Join(desc, "; ")
	})
}

// A service job asking for canaries is accepted now that service jobs roll
// out through deployments; its first version places its count without
// canaries (there is no older version to compare with), in a deployment.
func TestServiceAcceptsCanary(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-canary"
	hcl := strings.Replace(fmt.Sprintf(serviceJob, id, 2, "300"), "max_parallel = 2", "max_parallel = 2\n    canary       = 1", 1)
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "canary.hcl", hcl))
	a.waitServiceRunning(id, 2, 0)
	d := a.latestDeployment(id)
	if d == nil || d.JobVersion != 0 || d.TaskGroups["g"].DesiredTotal != 2 || d.TaskGroups["g"].DesiredCanaries != 0 {
		t.Errorf("first deployment: %v; want version 0, desired_total 2, no canaries", d)
	}
}

// A user runs examples/jobs/service.hcl — Nomad's example job in shape
// (job "example", group "cache", update, migrate, restart, reschedule and
// ephemeral_disk blocks, no type) on raw_exec — then changes its task: the
// three allocations run as a service with the job file's policies, and the
// change rolls one allocation at a time (update.max_parallel = 1) through
// a deployment, each once the one before has been healthy for
// min_healthy_time (10s).
func TestExampleServiceJobRollingUpdate(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "example"
	src, err := os.ReadFile(exampleJob("service.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	a.MustCLI("job", "run", "-detach", exampleJob("service.hcl"))
	first := a.waitServiceRunning(id, 3, 0)

	var j struct {
		Type       string
		TaskGroups []struct {
			Name             string
			Count            int
			ReschedulePolicy struct {
				Delay         int64
				DelayFunction string
				MaxDelay      int64
				Unlimited     bool
			}
			RestartPolicy struct {
				Attempts int
				Mode     string
			}
		}
	}
	mustJSON(t, "job status -json", a.MustCLI("job", "status", "-json", id).Stdout, &j)
	if j.Type != "service" || len(j.TaskGroups) != 1 {
		t.Fatalf("job = %+v, want one group of a service job", j)
	}
	g := j.TaskGroups[0]
	rp := g.ReschedulePolicy
	if g.Name != "cache" || g.Count != 3 || rp.Delay != int64(30*time.Second) || rp.DelayFunction != "exponential" ||
		rp.MaxDelay != int64(time.Hour) || !rp.Unlimited || g.RestartPolicy.Attempts != 2 || g.RestartPolicy.Mode != "fail" {
		t.Errorf("group = %+v, want the job file's count, restart and reschedule", g)
	}

	changed := strings.Replace(string(src), `args    = ["3600"]`, `args    = ["3601"]`, 1)
	if changed == string(src) {
		t.Fatal("examples/jobs/service.hcl no longer has the task args this test changes")
	}
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "service.hcl", changed))
	rolled := a.waitServiceRunning(id, 3, 1)
	old := map[string]bool{}
	for _, al := range first {
		old[al.ID] = true
	}
	perEval := map[string]int{}
	for _, al := range rolled {
		if old[al.ID] {
			t.Errorf("alloc %s (%s) survived a destructive change", al.ID, al.Name)
		}
		perEval[al.EvalID]++
	}
	t.Logf("replacements per eval: %v", perEval)
	if len(perEval) != 3 {
		t.Errorf("3 allocs replaced by %d evals; with max_parallel 1 each eval replaces one: %v", len(perEval), perEval)
	}
	a.MustCLI("job", "stop", "-detach", id)
}

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// canaryJob is a service job of three raw_exec tasks rolled out through
// deployments: one canary, then one at a time, health after 1s, reverted
// when a deployment fails. It sets no progress deadline, so that, as in
// Nomad, the first unhealthy allocation fails its deployment (with one,
// the deployment would replace it and fail only at the deadline). Format
// it with the job ID (%q), the command and its arguments (a HCL list
// body).
const canaryJob = `job %q {
  datacenters = ["*"]

  group "g" {
    count = 3

    update {
      max_parallel      = 1
      canary            = 1
      min_healthy_time  = "1s"
      healthy_deadline  = "30s"
      progress_deadline = "0"
      auto_revert       = true
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = %q
        args    = [%s]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// e2eDeployment is what the test reads of a deployment.
type e2eDeployment struct {
	ID, Status, StatusDescription string
	JobVersion                    uint64
	TaskGroups                    map[string]struct {
		Promoted                                     bool
		DesiredTotal, DesiredCanaries                int
		PlacedCanaries                               []string
		PlacedAllocs, HealthyAllocs, UnhealthyAllocs int
	}
}

func (d e2eDeployment) String() string {
	g := d.TaskGroups["g"]
	return fmt.Sprintf("deployment %.8s v%d %s (%s): canaries %d/%d promoted=%v placed=%d healthy=%d unhealthy=%d",
		d.ID, d.JobVersion, d.Status, d.StatusDescription, len(g.PlacedCanaries), g.DesiredCanaries, g.Promoted,
		g.PlacedAllocs, g.HealthyAllocs, g.UnhealthyAllocs)
}

// deployAlloc is what the test reads of an alloc list entry.
type deployAlloc struct {
	ID, EvalID, Name            string
	JobVersion                  uint64
	DesiredStatus, ClientStatus string
	DeploymentStatus            *struct {
		Healthy *bool
		Canary  bool
	}
}

func (al deployAlloc) canary() bool { return al.DeploymentStatus != nil && al.DeploymentStatus.Canary }

func (a *testAgent) latestDeployment(jobID string) *e2eDeployment {
	a.t.Helper()
	var d *e2eDeployment
	if status, err := a.Do(http.MethodGet, "/v1/job/"+harness.Escape(jobID)+"/deployment", nil, &d); err != nil || status != http.StatusOK {
		a.t.Fatalf("GET latest deployment of %s: %d %v", jobID, status, err)
	}
	return d
}

func (a *testAgent) deployAllocs(jobID string) []deployAlloc {
	a.t.Helper()
	var out []deployAlloc
	if status, err := a.Do(http.MethodGet, "/v1/job/"+harness.Escape(jobID)+"/allocations", nil, &out); err != nil || status != http.StatusOK {
		a.t.Fatalf("GET allocations of %s: %d %v", jobID, status, err)
	}
	return out
}

// jobVersion is what the test reads of a job version.
type jobVersion struct {
	Version    uint64
	Stable     bool
	TaskGroups []struct {
		Tasks []struct {
			Config map[string]any
		}
	}
}

func (v jobVersion) config(t *testing.T) string {
	t.Helper()
	if len(v.TaskGroups) != 1 || len(v.TaskGroups[0].Tasks) != 1 {
		t.Fatalf("job version %d: want one group of one task: %+v", v.Version, v)
	}
	b, err := json.Marshal(v.TaskGroups[0].Tasks[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (a *testAgent) jobVersions(jobID string) map[uint64]jobVersion {
	a.t.Helper()
	var out struct{ Versions []jobVersion }
	if status, err := a.Do(http.MethodGet, "/v1/job/"+harness.Escape(jobID)+"/versions", nil, &out); err != nil || status != http.StatusOK {
		a.t.Fatalf("GET versions of %s: %d %v", jobID, status, err)
	}
	m := map[uint64]jobVersion{}
	for _, v := range out.Versions {
		m[v.Version] = v
	}
	return m
}

// describeAllocs is the wait message's view of the allocs.
func describeAllocs(allocs []deployAlloc) string {
	var desc []string
	for _, al := range allocs {
		h := "?"
		if al.DeploymentStatus != nil && al.DeploymentStatus.Healthy != nil {
			h = fmt.Sprint(*al.DeploymentStatus.Healthy)
		}
		desc = append(desc, fmt.Sprintf("%s v%d %s/%s canary=%v healthy=%s", al.Name, al.JobVersion, al.DesiredStatus, al.ClientStatus, al.canary(), h))
	}
	return strings.Join(desc, "; ")
}

// A user rolls a service job out with a canary on the dev agent, as in
// Nomad: the canary runs next to the three old allocs until promoted;
// promotion replaces the old ones one at a time, health-gated, and the
// deployment succeeds, marking the version stable; a broken version's
// canary goes unhealthy, its deployment fails, and auto_revert registers
// the stable version again.
func TestServiceCanaryDeployment(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-deploy"
	run := func(command, args string) {
		a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "deploy.hcl", fmt.Sprintf(canaryJob, id, command, args)))
	}

	// Version 0: a new job places all three at once in a deployment
	// without canaries, which succeeds.
	run("/bin/sleep", `"300"`)
	harness.WaitFor(t, waitTimeout, "version 0's deployment to succeed and the version to be stable", func() (bool, string) {
		d := a.latestDeployment(id)
		if d == nil {
			return false, "no deployment"
		}
		return d.JobVersion == 0 && d.Status == "successful" && a.jobVersions(id)[0].Stable, d.String()
	})
	old := map[string]bool{}
	for _, al := range a.deployAllocs(id) {
		if al.DesiredStatus == "run" {
			old[al.ID] = true
		}
	}
	if len(old) != 3 {
		t.Fatalf("after version 0: %d allocs wanted, want 3: %s", len(old), describeAllocs(a.deployAllocs(id)))
	}

	// Version 1: one canary, healthy, next to the three old allocs; the
	// deployment waits for promotion and nothing else moves.
	run("/bin/sleep", `"301"`)
	var dep *e2eDeployment
	harness.WaitFor(t, waitTimeout, "version 1's canary to be healthy and the deployment to wait for promotion", func() (bool, string) {
		dep = a.latestDeployment(id)
		if dep == nil || dep.JobVersion != 1 {
			return false, fmt.Sprint(dep)
		}
		g := dep.TaskGroups["g"]
		return dep.Status == "running" && len(g.PlacedCanaries) == 1 && g.HealthyAllocs == 1 &&
			strings.Contains(dep.StatusDescription, "promotion"), dep.String()
	})
	if g := dep.TaskGroups["g"]; g.DesiredTotal != 3 || g.DesiredCanaries != 1 || g.Promoted {
		t.Errorf("version 1's deployment: %s; want desired_total 3, desired_canaries 1, not promoted", dep)
	}
	allocs := a.deployAllocs(id)
	oldRunning, canaries := 0, 0
	for _, al := range allocs {
		switch {
		case al.DesiredStatus != "run":
			t.Errorf("before promotion, alloc %s (%s v%d) is %s: nothing may be stopped", al.ID, al.Name, al.JobVersion, al.DesiredStatus)
		case old[al.ID] && al.ClientStatus == "running":
			oldRunning++
		case al.JobVersion == 1 && al.canary() && al.ClientStatus == "running":
			canaries++
		}
	}
	if oldRunning != 3 || canaries != 1 || len(allocs) != 4 {
		t.Fatalf("before promotion: want the 3 old allocs and 1 canary running: %s", describeAllocs(allocs))
	}

	// Promotion: the old allocs are replaced, one at a time, and the
	// deployment succeeds; version 1 becomes stable.
	if res := a.MustCLI("deployment", "promote", dep.ID); !strings.Contains(res.Stdout, "promoted") {
		t.Errorf("deployment promote: %s", res)
	}
	harness.WaitFor(t, waitTimeout, "version 1's deployment to succeed with 3 allocs of version 1", func() (bool, string) {
		d := a.latestDeployment(id)
		allocs := a.deployAllocs(id)
		wanted, v1 := 0, 0
		for _, al := range allocs {
			if al.DesiredStatus == "run" {
				wanted++
				if al.JobVersion == 1 && al.ClientStatus == "running" {
					v1++
				}
			}
		}
		return d.ID == dep.ID && d.Status == "successful" && wanted == 3 && v1 == 3, d.String() + " | " + describeAllocs(allocs)
	})
	versions := a.jobVersions(id)
	if !versions[1].Stable {
		t.Errorf("version 1 is not stable after its deployment succeeded")
	}
	// The canary was kept, and the two old allocs left after it were
	// replaced one per evaluation (max_parallel = 1).
	perEval := map[string]int{}
	canaryKept := false
	for _, al := range a.deployAllocs(id) {
		if old[al.ID] && al.DesiredStatus == "run" {
			t.Errorf("old alloc %s (%s) still wanted after the rollout", al.ID, al.Name)
		}
		if al.DesiredStatus != "run" || al.JobVersion != 1 {
			continue
		}
		if al.ID == dep.TaskGroups["g"].PlacedCanaries[0] {
			canaryKept = true
			continue
		}
		perEval[al.EvalID]++
	}
	if !canaryKept {
		t.Errorf("the promoted canary %s is not among the wanted allocs", dep.TaskGroups["g"].PlacedCanaries[0])
	}
	if len(perEval) != 2 {
		t.Errorf("the 2 replacements after the canary came from %d evals, want 2 (max_parallel = 1): %v", len(perEval), perEval)
	}
	stableConfig := versions[1].config(t)

	// Version 2 exits at once: its canary goes unhealthy, the deployment
	// fails, and auto_revert registers version 1's job again as version 3.
	run("/bin/sh", `"-c", "exit 1"`)
	harness.WaitFor(t, waitTimeout, "version 2's deployment to fail and the job to be reverted", func() (bool, string) {
		d := a.latestDeployment(id)
		if d == nil || d.JobVersion < 2 {
			return false, fmt.Sprint(d)
		}
		vs := a.jobVersions(id)
		_, reverted := vs[3]
		return (d.JobVersion > 2 || d.Status == "failed") && reverted, d.String()
	})
	var failed *e2eDeployment
	var deps []*e2eDeployment
	if status, err := a.Do(http.MethodGet, "/v1/job/"+harness.Escape(id)+"/deployments", nil, &deps); err != nil || status != http.StatusOK {
		t.Fatalf("GET deployments: %d %v", status, err)
	}
	for _, d := range deps {
		if d.JobVersion == 2 {
			failed = d
		}
	}
	if failed == nil || failed.Status != "failed" || failed.TaskGroups["g"].UnhealthyAllocs == 0 {
		t.Errorf("version 2's deployment: %v; want failed with an unhealthy canary", failed)
	}
	versions = a.jobVersions(id)
	if got := versions[3].config(t); got != stableConfig {
		t.Errorf("reverted version 3's task config = %s, want the stable version 1's %s", got, stableConfig)
	}
	// The reverted job runs three allocs of version 3 (version 1's spec,
	// updated in place), and the broken canary is gone.
	harness.WaitFor(t, waitTimeout, "3 allocs of version 3 running and no version 2 alloc wanted", func() (bool, string) {
		allocs := a.deployAllocs(id)
		wanted, v3 := 0, 0
		for _, al := range allocs {
			if al.DesiredStatus == "run" {
				wanted++
				if al.JobVersion == 3 && al.ClientStatus == "running" {
					v3++
				}
			}
		}
		return wanted == 3 && v3 == 3, describeAllocs(allocs)
	})
}

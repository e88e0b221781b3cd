package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// `drover system gc` on the dev agent collects a finished sysbatch job with
// its evaluations and allocation, and leaves a running system job alone.
func TestSystemGCOnDevAgent(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	run := a.MustCLI("job", "run", exampleJob("sysbatch.hcl"))
	if !strings.Contains(run.Stdout, `finished with status "complete"`) {
		t.Fatalf("job run:\n%s", run)
	}
	var allocID string
	harness.WaitFor(t, waitTimeout, "the sysbatch job dead with its alloc complete", func() (bool, string) {
		var job struct{ Status string }
		if code, err := a.Do(http.MethodGet, "/v1/job/hello-sysbatch", nil, &job); err != nil || code != 200 || job.Status != "dead" {
			return false, fmt.Sprintf("%d %v %+v", code, err, job)
		}
		allocs := a.AllocsOf("hello-sysbatch")
		if len(allocs) != 1 || allocs[0].ClientStatus != "complete" {
			return false, fmt.Sprintf("%+v", allocs)
		}
		allocID = allocs[0].ID
		return true, ""
	})
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "sleeper.hcl", fmt.Sprintf(sleeperJob, "gc-keeps-me")))
	harness.WaitFor(t, waitTimeout, "the system job running", func() (bool, string) {
		allocs := a.AllocsOf("gc-keeps-me")
		return len(allocs) == 1 && allocs[0].ClientStatus == "running", fmt.Sprintf("%+v", allocs)
	})

	if out := a.MustCLI("system", "gc"); out.Stdout != "" {
		t.Errorf("system gc printed %q, want nothing", out.Stdout)
	}
	for _, path := range []string{"/v1/job/hello-sysbatch", "/v1/allocation/" + allocID} {
		if code, err := a.Do(http.MethodGet, path, nil, nil); err != nil || code != http.StatusNotFound {
			t.Errorf("GET %s after system gc: %d %v, want 404", path, code, err)
		}
	}
	if code, _ := a.Do(http.MethodGet, "/v1/job/gc-keeps-me", nil, nil); code != 200 {
		t.Errorf("the running system job answers %d after system gc", code)
	}
	if allocs := a.AllocsOf("gc-keeps-me"); len(allocs) != 1 || allocs[0].ClientStatus != "running" {
		t.Errorf("the running system job's allocs after system gc: %+v", allocs)
	}
}

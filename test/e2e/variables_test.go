package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// variablesReaderJob renders the job's variable into a file with nomadVar
// and prints it; a change of the variable restarts it.
const variablesReaderJob = `job %q {
  datacenters = ["*"]

  group "g" {
    task "t" {
      driver = "raw_exec"

      template {
        data        = "{{ with nomadVar \"nomad/jobs/%s\" }}pass={{ .pass }}{{ end }}\n"
        destination = "secrets/pass.env"
        change_mode = "restart"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "cat secrets/pass.env; exec sleep 600"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// Variables on the dev agent: written and read with the CLI, and read by
// a task's template under the task's own identity; a new value re-renders
// the template and restarts the task.
func TestVariablesTemplate(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const job = "e2e-vars"
	a.MustCLI("var", "put", "nomad/jobs/"+job, "pass=one")
	res := a.MustCLI("var", "get", "-item", "pass", "nomad/jobs/"+job)
	if strings.TrimSpace(res.Stdout) != "one" {
		t.Fatalf("var get: %q", res.Stdout)
	}
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, job+".hcl", fmt.Sprintf(variablesReaderJob, job, job)))
	allocs := a.waitServiceRunning(job, 1, 0)
	harness.WaitFor(t, waitTimeout, "the rendered variable", func() (bool, string) {
		res := a.CLI("alloc", "logs", allocs[0].ID, "t")
		return strings.Contains(res.Stdout, "pass=one"), res.Stdout + res.Stderr
	})
	a.MustCLI("var", "put", "nomad/jobs/"+job, "pass=two")
	harness.WaitFor(t, waitTimeout, "the re-rendered variable after a restart", func() (bool, string) {
		res := a.CLI("alloc", "logs", allocs[0].ID, "t")
		return strings.Contains(res.Stdout, "pass=two"), res.Stdout + res.Stderr
	})
	a.MustCLI("job", "stop", job)
}

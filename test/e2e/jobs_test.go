package e2e

import "github.com/drover-org/drover/test/internal/harness"

// Job files the tests write. Each test formats in a job ID of its own.

// sleeperJob is a system job whose task writes its pid to the shared alloc
// dir and then becomes `sleep 3600` (exec keeps the pid), so a test can find
// and kill the very process the driver runs. The restart policy allows two
// quick restarts before the allocation fails.
const sleeperJob = `job %q {
  type        = "system"
  datacenters = ["*"]

  group "sleeper" {
    restart {
      attempts = 2
      interval = "1m"
      delay    = "1s"
      mode     = "fail"
    }

    task "sleep" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ > $NOMAD_ALLOC_DIR/pid; exec sleep 3600"]
      }

      kill_timeout = "2s"

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`

// trueJob is the smallest sysbatch job: one /bin/true per node.
const trueJob = harness.TrueJob

# A sysbatch job runs once on every eligible node and then finishes.
# Run it with: drover job run examples/jobs/sysbatch.hcl
job "hello-sysbatch" {
  type        = "sysbatch"
  datacenters = ["*"]

  group "hello" {
    task "hello" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        # $NOMAD_ALLOC_NAME is expanded by the shell from the task's
        # environment; HCL leaves a bare $ alone.
        args = ["-c", "echo hello from $NOMAD_ALLOC_NAME on $(hostname)"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}

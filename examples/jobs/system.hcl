# A system job keeps one allocation running on every eligible node,
# including nodes that join later.
job "sleeper" {
  type        = "system"
  datacenters = ["*"]

  group "sleeper" {
    # A task that dies is restarted quickly; once the attempts are used up
    # the allocation fails and the scheduler replaces it.
    restart {
      attempts = 2
      interval = "1m"
      delay    = "1s"
      mode     = "fail"
    }

    task "sleep" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      # Stopping the job should not wait the default 5s per node.
      kill_timeout = "2s"

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}

# A system job keeps one allocation running on every eligible node,
# including nodes that join later.
job "sleeper" {
  type        = "system"
  datacenters = ["*"]

  group "sleeper" {
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

# A periodic sysbatch job: every minute, each eligible node prints the date.
# Each launch is a child job named tick/periodic-<unix seconds>.
job "tick" {
  type        = "sysbatch"
  datacenters = ["*"]

  periodic {
    cron             = "*/1 * * * *"
    prohibit_overlap = true
    time_zone        = "UTC"
  }

  group "tick" {
    task "date" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo tick on $(hostname) at $(date -u)"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}

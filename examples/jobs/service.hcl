# A service job in the shape of Nomad's example job (`nomad job init`),
# on raw_exec: no type (service is the default), one group of three
# long-running tasks kept running, rolled one at a time when the task
# changes, restarted in place a few times and then rescheduled.
job "example" {
  datacenters = ["*"]

  # Rolling updates through a deployment: replace one allocation at a
  # time, the next once the replacement has been healthy for 10s.
  update {
    max_parallel      = 1
    min_healthy_time  = "10s"
    healthy_deadline  = "3m"
    progress_deadline = "10m"
    auto_revert       = false
    canary            = 0
  }

  # Draining a node moves one allocation at a time.
  migrate {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "10s"
    healthy_deadline = "5m"
  }

  group "cache" {
    count = 3

    # A task that dies is restarted on its node twice within 30 minutes,
    # 15s apart; then the allocation fails.
    restart {
      attempts = 2
      interval = "30m"
      delay    = "15s"
      mode     = "fail"
    }

    # A failed allocation is placed again, preferably on another node,
    # after 30s, then 1m, 2m ... up to 1h, for as long as it keeps failing.
    reschedule {
      delay          = "30s"
      delay_function = "exponential"
      max_delay      = "1h"
      unlimited      = true
    }

    ephemeral_disk {
      size = 300
    }

    task "redis" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      kill_timeout = "2s"

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}

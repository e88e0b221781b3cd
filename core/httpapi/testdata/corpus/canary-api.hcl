# A stateless API rolled out with a canary, spread over two racks and
# rescheduled with a slower back-off than the default.
job "api" {
  datacenters = ["dc1"]

  spread {
    attribute = "${meta.rack}"
    weight    = 100
  }

  group "api" {
    count = 4

    update {
      max_parallel      = 2
      canary            = 1
      auto_promote      = false
      health_check      = "task_states"
      min_healthy_time  = "15s"
      healthy_deadline  = "2m"
      progress_deadline = "8m"
    }

    reschedule {
      delay          = "1m"
      delay_function = "fibonacci"
      max_delay      = "30m"
      unlimited      = true
    }

    affinity {
      attribute = "${node.class}"
      value     = "fast"
      weight    = 50
    }

    task "api" {
      driver = "raw_exec"

      config {
        command = "/usr/local/bin/api"
      }

      resources {
        cpu        = 250
        memory     = 128
        memory_max = 256
      }
    }
  }
}

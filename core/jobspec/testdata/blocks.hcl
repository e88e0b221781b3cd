job "web" {
  datacenters = ["dc1"]
  ui {
    description = "The **web** front end"
    link {
      label = "Runbook"
      url   = "https://example.com/runbook"
    }
    link {
      label = "Dashboard"
      url   = "https://example.com/d"
    }
  }
  reschedule {
    attempts = 5
  }
  group "app" {
    count = 3
    prevent_reschedule_on_lost = false
    disconnect {
      reconcile = "keep_original"
    }
    scaling {
      enabled = true
      min     = 1
      max     = 10
      policy {
        evaluation_interval = "5s"
        cooldown            = "1m"
        check "avg_cpu" {
          source = "nomad-apm"
          query  = "avg_cpu-allocated"
          strategy "target-value" {
            target = 70
          }
        }
      }
    }
    task "server" {
      driver = "raw_exec"
      kind   = "worker"
      shutdown_delay = "5s"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
      resources {
        cpu     = 200
        memory  = 128
        secrets = 2
        numa {
          affinity = "none"
        }
      }
      action "echo-env" {
        command = "/bin/sh"
        args    = ["-c", "env"]
      }
    }
  }
}

# A web service scaled by the Nomad Autoscaler between 2 and 10 instances,
# with links for the UI, a task action and the 1.6+ resource attributes.
job "autoscaled-web" {
  datacenters = ["dc1"]

  ui {
    description = "Public web front end"
    link {
      label = "Runbook"
      url   = "https://wiki.example.com/runbooks/web"
    }
  }

  group "web" {
    # No count: Nomad starts the group at the scaling block's min.
    scaling {
      enabled = true
      min     = 2
      max     = 10

      policy {
        evaluation_interval = "10s"
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

    disconnect {
      reconcile = "longest_running"
    }

    network {
      port "http" {}
    }

    task "server" {
      driver         = "docker"
      kind           = "frontend"
      shutdown_delay = "5s"

      config {
        image   = "busybox:1.36"
        command = "httpd"
        args    = ["-f", "-p", "${NOMAD_PORT_http}"]
        ports   = ["http"]
      }

      action "show-config" {
        command = "/bin/cat"
        args    = ["/etc/httpd.conf"]
      }

      resources {
        cpu     = 100
        memory  = 64
        secrets = 4
        numa {
          affinity = "none"
        }
      }
    }
  }
}

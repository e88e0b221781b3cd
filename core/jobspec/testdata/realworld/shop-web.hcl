# A web shop front end as teams commonly write it for Nomad with Consul:
# services without a provider (Consul's), a consul namespace, canaries,
# scaling and placement preferences.
job "shop-web" {
  datacenters = ["eu-west-1a", "eu-west-1b"]
  type        = "service"
  priority    = 60

  meta {
    team = "storefront"
  }

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  spread {
    attribute = "${node.datacenter}"
    weight    = 80

    target "eu-west-1a" {
      percent = 50
    }
    target "eu-west-1b" {
      percent = 50
    }
  }

  update {
    max_parallel      = 2
    canary            = 2
    min_healthy_time  = "15s"
    healthy_deadline  = "3m"
    progress_deadline = "8m"
    auto_revert       = true
    auto_promote      = true
  }

  migrate {
    max_parallel     = 1
    health_check     = "checks"
    min_healthy_time = "20s"
    healthy_deadline = "4m"
  }

  group "frontend" {
    count = 4

    consul {
      namespace = "storefront"
    }

    network {
      port "http" {
        to = 8080
      }
    }

    scaling {
      enabled = true
      min     = 2
      max     = 12

      policy {
        cooldown            = "2m"
        evaluation_interval = "30s"

        check "avg_rps" {
          source = "prometheus"
          query  = "sum(rate(http_requests_total[1m]))"

          strategy "target-value" {
            target = 200
          }
        }
      }
    }

    affinity {
      attribute = "${node.class}"
      value     = "web"
      weight    = 70
    }

    restart {
      attempts = 3
      interval = "5m"
      delay    = "20s"
      mode     = "delay"
    }

    ephemeral_disk {
      size   = 500
      sticky = true
    }

    service {
      name = "shop-web"
      port = "http"
      tags = ["urlprefix-/shop", "http"]

      check {
        name     = "alive"
        type     = "http"
        path     = "/healthz"
        interval = "10s"
        timeout  = "2s"

        check_restart {
          limit = 3
          grace = "30s"
        }
      }
    }

    task "web" {
      driver = "docker"

      config {
        image = "registry.example.com/shop/web:2.4.1"
        ports = ["http"]
      }

      env {
        LISTEN_ADDR = "0.0.0.0:8080"
      }

      resources {
        cpu        = 300
        memory     = 256
        memory_max = 512
      }

      logs {
        max_files     = 5
        max_file_size = 20
      }

      # Nomad Enterprise's dynamic application sizing.
      scaling "mem" {
        enabled = true
        min     = 128
        max     = 1024

        policy {
          cooldown = "5m"
        }
      }

      kill_timeout = "20s"
      kill_signal  = "SIGTERM"
    }
  }
}

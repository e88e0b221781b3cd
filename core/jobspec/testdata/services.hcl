job "shop" {
  datacenters = ["dc1"]

  group "web" {
    network {
      port "http" {}
      port "admin" {
        static = 9090
      }
    }

    service {
      provider     = "nomad"
      port         = "http"
      tags         = ["web", "v1"]
      canary_tags  = ["canary"]
      meta {
        version = "1"
      }
      canary_meta = {
        "canary.version" = "2"
      }
      task = "server"

      check_restart {
        limit = 3
        grace = "10s"
      }

      check {
        type     = "http"
        path     = "/health"
        interval = "10s"
        timeout  = "2s"
        header {
          Authorization = ["Basic abc"]
        }
      }

      check {
        name                     = "alive"
        type                     = "script"
        command                  = "/bin/true"
        args                     = ["-v"]
        interval                 = "30s"
        timeout                  = "5s"
        success_before_passing   = 2
        failures_before_critical = 3
        on_update                = "ignore_warnings"
        check_restart {
          limit           = 5
          ignore_warnings = true
        }
      }
    }

    service {
      name                = "shop-admin"
      provider            = "nomad"
      port                = "admin"
      address             = "10.0.0.1"
      enable_tag_override = true
      on_update           = "ignore"

      check {
        type            = "http"
        protocol        = "https"
        method          = "POST"
        body            = "{}"
        path            = "/ping"
        tls_server_name = "admin.local"
        tls_skip_verify = true
        initial_status  = "passing"
        interval        = "5s"
        timeout         = "1s"
      }
    }

    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/server"
      }

      service {
        name     = "server-${NOMAD_ALLOC_INDEX}"
        provider = "nomad"
        port     = "8080"

        check {
          type     = "tcp"
          interval = "10s"
          timeout  = "2s"
        }
      }
    }
  }
}

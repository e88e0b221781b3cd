# A nightly database dump: periodic, fetches its tool as an artifact,
# renders its configuration, and is retried on failure.
variable "bucket" {
  type    = string
  default = "s3-backups-eu"
}

job "nightly-backup" {
  type        = "batch"
  datacenters = ["dc1"]
  node_pool   = "batch"

  periodic {
    crons            = ["0 2 * * *", "30 14 * * 6"]
    time_zone        = "Europe/Paris"
    prohibit_overlap = true
  }

  reschedule {
    attempts       = 2
    interval       = "6h"
    delay          = "5m"
    delay_function = "constant"
    unlimited      = false
  }

  group "dump" {
    restart {
      attempts = 1
      interval = "1h"
      delay    = "30s"
      mode     = "fail"
    }

    constraint {
      attribute = "${meta.storage}"
      operator  = "="
      value     = "ssd"
    }

    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    task "dump" {
      driver = "raw_exec"
      user   = "backup"

      artifact {
        source      = "https://releases.example.com/pgdump-wrapper/1.2.0/pgdump-wrapper_linux_amd64.tar.gz"
        destination = "local/bin"
        options {
          checksum = "sha256:3b1c5d0f6f4e7a7c9b8a2e1d0c3b4a5968778695a4b3c2d1e0f9a8b7c6d5e4f3"
        }
      }

      template {
        data        = "bucket = \"${var.bucket}\"\nhost = \"{{ env \"attr.unique.hostname\" }}\"\n"
        destination = "local/backup.toml"
        perms       = "0640"
        change_mode = "noop"
      }

      config {
        command = "local/bin/pgdump-wrapper"
        args    = ["-config", "local/backup.toml"]
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}

# A nightly backup in its operator's time zone, never two at once, with a
# seven-field cron for the hourly check (seconds and years, as Nomad's
# cron library reads them).
job "restic-backup" {
  type     = "batch"
  priority = 70

  periodic {
    crons            = ["0 2 * * 1,5", "0 */5 * * * * *"]
    time_zone        = "Europe/Berlin"
    prohibit_overlap = true
  }

  group "backup" {
    restart {
      attempts = 0
    }

    task "restic" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["local/run.sh"]
      }

      template {
        destination = "local/run.sh"
        perms       = "0755"
        data        = <<-EOF
          #!/bin/sh
          set -eu
          echo "backing up {{ env "NOMAD_META_path" }}"
        EOF
      }

      meta {
        path = "/srv"
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}

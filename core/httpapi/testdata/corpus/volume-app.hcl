# A database claiming a CSI volume for writing, one writer at a time.
job "postgres" {
  datacenters = ["dc1"]

  update {
    max_parallel     = 1
    min_healthy_time = "30s"
    healthy_deadline = "5m"
    auto_revert      = true
  }

  group "db" {
    volume "data" {
      type            = "csi"
      source          = "pgdata"
      read_only       = false
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }

    network {
      port "pg" {
        static = 5432
      }
    }

    task "postgres" {
      driver = "docker"

      volume_mount {
        volume      = "data"
        destination = "/var/lib/postgresql/data"
      }

      config {
        image = "postgres:16"
        ports = ["pg"]
      }

      env {
        PGDATA = "/var/lib/postgresql/data/pgdata"
      }

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }
}

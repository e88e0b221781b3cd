# A prestart task that waits for a dependency, the app fetched as an
# artifact with a checksum, a sidecar log shipper and a poststop cleanup.
job "app-with-hooks" {
  datacenters = ["dc1"]

  group "app" {
    network {
      port "http" {}
    }

    task "wait-for-db" {
      driver = "raw_exec"

      lifecycle {
        hook    = "prestart"
        sidecar = false
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "until nc -z db.internal 5432; do sleep 1; done"]
      }
    }

    task "app" {
      driver = "raw_exec"
      leader = true

      artifact {
        source      = "https://releases.example/app/app_1.2.3_linux_amd64.tar.gz"
        destination = "local/bin"
        options {
          checksum = "sha256:4f2a7c3b5d0e6f8a9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a"
        }
      }

      config {
        command = "local/bin/app"
        args    = ["-listen", ":${NOMAD_PORT_http}"]
      }
    }

    task "ship-logs" {
      driver = "raw_exec"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        command = "/usr/bin/tail"
        args    = ["-F", "${NOMAD_ALLOC_DIR}/logs/app.stdout.0"]
      }
    }

    task "cleanup" {
      driver = "raw_exec"

      lifecycle {
        hook = "poststop"
      }

      config {
        command = "/bin/rm"
        args    = ["-rf", "${NOMAD_ALLOC_DIR}/data/tmp"]
      }
    }
  }
}

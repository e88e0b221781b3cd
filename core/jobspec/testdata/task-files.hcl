job "files" {
  datacenters = ["dc1"]

  group "web" {
    task "server" {
      driver = "raw_exec"

      config {
        command = "local/bin/server"
        args    = ["-config", "local/server.conf"]
      }

      artifact {
        source      = "https://example.com/server.tar.gz"
        destination = "local/bin"
        options {
          checksum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
        }
        headers {
          User-Agent = "drover"
        }
      }

      artifact {
        source = "git::https://example.com/repo.git"
        mode   = "dir"
      }

      template {
        data        = <<-EOT
          listen = "{{ env "NOMAD_ALLOC_ID" }}"
          EOT
        destination = "local/server.conf"
        change_mode = "signal"
        change_signal = "sighup"
        perms       = "0600"
        splay       = "10s"
        wait {
          min = "2s"
          max = "10s"
        }
      }

      template {
        data            = "PORT=[[ env \"NOMAD_PORT_http\" ]]"
        destination     = "secrets/app.env"
        env             = true
        left_delimiter  = "[["
        right_delimiter = "]]"
      }
    }
  }
}

# A Nomad job giving its tasks a client's host volumes (agent config
# client { host_volume "shared_data" { path = "/srv/data" } }).
job "db" {
  datacenters = ["dc1"]

  group "db" {
    count = 2

    volume "data" {
      type      = "host"
      source    = "shared_data"
      read_only = false
    }

    volume "certs" {
      type      = "host"
      source    = "certs"
      read_only = true
    }

    volume "scratch" {
      type      = "host"
      source    = "scratch"
      per_alloc = true
    }

    task "db" {
      driver = "docker"

      config {
        image = "postgres:16"
      }

      volume_mount {
        volume           = "data"
        destination      = "/var/lib/postgresql/data"
        propagation_mode = "private"
      }

      volume_mount {
        volume      = "certs"
        destination = "/etc/ssl/db"
        read_only   = true
      }

      volume_mount {
        volume      = "scratch"
        destination = "local/scratch"
      }
    }
  }
}

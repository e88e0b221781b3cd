# A service registered in Consul (Nomad's default provider): drover has no
# Consul integration, so the service block is refused by name.
job "whoami" {
  datacenters = ["dc1"]

  group "web" {
    network {
      port "http" {
        to = 80
      }
    }

    service {
      name = "whoami"
      port = "http"
      tags = ["urlprefix-/whoami"]

      check {
        type     = "http"
        path     = "/health"
        interval = "10s"
        timeout  = "2s"
      }
    }

    task "whoami" {
      driver = "docker"

      config {
        image = "traefik/whoami:v1.10"
        ports = ["http"]
      }
    }
  }
}

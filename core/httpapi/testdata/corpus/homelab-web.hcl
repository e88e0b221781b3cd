# A homelab web app: docker, a mapped dynamic port, a native service with an
# http check, an index page rendered by a template from the task's env.
job "homelab-web" {
  datacenters = ["home"]

  group "servers" {
    count = 2

    network {
      port "www" {
        to = 8001
      }
    }

    service {
      provider = "nomad"
      port     = "www"
      tags     = ["traefik.enable=true"]

      check {
        type     = "http"
        path     = "/"
        interval = "5s"
        timeout  = "1s"
      }
    }

    task "web" {
      driver = "docker"

      config {
        image   = "busybox:1"
        command = "httpd"
        args    = ["-v", "-f", "-p", "${NOMAD_PORT_www}", "-h", "/local"]
        ports   = ["www"]
      }

      template {
        data        = <<-EOF
          <h1>{{ env "NOMAD_JOB_NAME" }}</h1>
          <p>{{ env "NOMAD_ALLOC_INDEX" }} on port {{ env "NOMAD_PORT_www" }}</p>
        EOF
        destination = "local/index.html"
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}

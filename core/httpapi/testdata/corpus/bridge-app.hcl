# A web app in bridge networking: the allocation's own network namespace, a
# dynamic host port mapped to the app's 8080 and a static metrics port, a
# native service on the mapped port, a docker task and a raw_exec sidecar
# sharing the namespace.
job "bridge-app" {
  datacenters = ["dc1"]

  group "app" {
    network {
      mode = "bridge"

      port "http" {
        to = 8080
      }

      port "metrics" {
        static = 9102
        to     = 9102
      }
    }

    service {
      provider = "nomad"
      name     = "bridge-app"
      port     = "http"
    }

    task "web" {
      driver = "docker"

      config {
        image   = "busybox:1"
        command = "httpd"
        args    = ["-f", "-p", "8080", "-h", "/local"]
      }
    }

    task "metrics" {
      driver = "raw_exec"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        command = "/usr/local/bin/exporter"
        args    = ["--listen", "0.0.0.0:9102"]
      }
    }
  }
}

job "web" {
  datacenters = ["dc1"]

  group "web" {
    network {
      mode = "host"
      port "http" {
        static       = 8080
        to           = 80
        host_network = "default"
      }
      port "dyn" {}
    }

    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/server"
        args    = ["-listen", ":${NOMAD_PORT_http}"]
      }
    }
  }
}

# A metrics exporter on every node, on its well-known static port,
# discoverable through Nomad's own service catalogue.
job "node-exporter" {
  datacenters = ["*"]
  type        = "system"

  update {
    max_parallel = 2
    stagger      = "10s"
  }

  group "exporter" {
    network {
      port "metrics" {
        static = 9100
      }
    }

    service {
      name     = "node-exporter"
      provider = "nomad"
      port     = "metrics"
      tags     = ["prometheus"]

      check {
        name     = "metrics reachable"
        type     = "tcp"
        interval = "15s"
        timeout  = "3s"
      }
    }

    task "exporter" {
      driver = "docker"

      config {
        image        = "prom/node-exporter:v1.8.2"
        network_mode = "host"
        args         = ["--web.listen-address=:${NOMAD_PORT_metrics}"]
      }

      resources {
        cpu    = 100
        memory = 50
      }
    }
  }
}

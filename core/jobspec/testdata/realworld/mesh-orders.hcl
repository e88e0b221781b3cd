# A service in a Consul service mesh: a sidecar proxy with upstreams and an
# exposed health path, its Envoy task tuned with sidecar_task.
job "orders" {
  datacenters = ["dc1"]

  group "orders" {
    network {
      port "http" {
        to = 9090
      }
      port "expose" {
        to = -1
      }
    }

    service {
      name = "orders"
      port = "9090"

      tagged_addresses = {
        lan = "10.0.0.10"
      }

      connect {
        sidecar_service {
          tags = ["mesh"]

          proxy {
            local_service_port = 9090

            upstreams {
              destination_name = "inventory"
              local_bind_port  = 8081
            }

            upstreams {
              destination_name     = "billing"
              destination_namespace = "finance"
              local_bind_port      = 8082
              datacenter           = "dc2"

              mesh_gateway {
                mode = "local"
              }
            }

            expose {
              path {
                path            = "/health"
                protocol        = "http"
                local_path_port = 9090
                listener_port   = "expose"
              }
            }

            config {
              protocol = "http"
            }
          }
        }

        sidecar_task {
          resources {
            cpu    = 100
            memory = 64
          }

          logs {
            max_files = 2
          }

          kill_timeout = "10s"
        }
      }

      check {
        type     = "http"
        path     = "/health"
        expose   = true
        interval = "10s"
        timeout  = "3s"
      }
    }

    task "orders" {
      driver = "docker"

      config {
        image = "registry.example.com/orders:1.8"
      }
    }
  }
}

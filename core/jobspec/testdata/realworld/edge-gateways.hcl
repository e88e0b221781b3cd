# Consul ingress and terminating gateways, each run by Nomad as a group.
job "edge" {
  datacenters = ["dc1"]

  group "ingress" {
    network {
      port "inbound" {
        static = 8080
      }
    }

    service {
      name = "edge-ingress"
      port = "8080"

      connect {
        gateway {
          proxy {
            connect_timeout = "5s"
          }

          ingress {
            tls {
              enabled         = true
              tls_min_version = "TLSv1_2"
            }

            listener {
              port     = 8080
              protocol = "http"

              service {
                name  = "shop-web"
                hosts = ["shop.example.com"]
              }
            }
          }
        }
      }
    }
  }

  group "terminating" {
    service {
      name = "edge-terminating"

      connect {
        gateway {
          proxy {
            envoy_gateway_bind_addresses "default" {
              address = "0.0.0.0"
              port    = 9443
            }
          }

          terminating {
            service {
              name    = "legacy-billing"
              ca_file = "/etc/certs/ca.pem"
              sni     = "billing.internal"
            }
          }
        }
      }
    }
  }
}

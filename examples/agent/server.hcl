# A server of a three-server cluster. Run one on each of three hosts
# (server1..server3), changing `name` and the advertise address:
#   drover agent -config server.hcl
name      = "server1"
data_dir  = "/var/lib/drover"
bind_addr = "0.0.0.0"

advertise {
  # The address the other agents reach this one on.
  http = "server1"
  rpc  = "server1"
}

ports {
  http = 4646
  rpc  = 4647 # gRPC between agents and Raft share this port
}

server {
  enabled          = true
  bootstrap_expect = 3
  num_schedulers   = 2

  server_join {
    retry_join     = ["server1:4647", "server2:4647", "server3:4647"]
    retry_interval = "1s"
  }
}

# Mutual TLS between all agents (uncomment with real files):
# tls {
#   rpc                    = true
#   ca_file                = "/etc/drover/tls/ca.pem"
#   cert_file              = "/etc/drover/tls/server.pem"
#   key_file               = "/etc/drover/tls/server-key.pem"
#   verify_server_hostname = true   # server certs must name server.global.drover
#   http                   = true   # the HTTP API over HTTPS, same cert and CA
#   verify_https_client    = true   # ...requiring client certificates of the CA
# }

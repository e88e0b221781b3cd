# A client node that joins the cluster of server.hcl:
#   drover agent -config client.hcl
name      = "client1"
data_dir  = "/var/lib/drover"
bind_addr = "0.0.0.0"

advertise {
  http = "client1" # servers proxy `alloc logs` to this address
}

client {
  enabled    = true
  servers    = ["server1:4647", "server2:4647", "server3:4647"]
  # The token `drover operator join-token client` prints on a server; the
  # client trades it for a certificate of the cluster CA on its first start.
  # join_token = "DRJT-1-..."
  node_class = "general"
  node_pool  = "default"
  meta = {
    rack = "r1"
  }
}

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

# raw_exec runs tasks directly on the host, so it is off outside -dev
# (docs/rawexec.md). Enabled, each task runs in a cgroup of its own with its
# memory and cpu limits, as the `user` it names; root is denied unless
# denied_host_users says otherwise.
plugin "raw_exec" {
  config {
    enabled           = true
    denied_host_users = ["root"] # the default
    # no_cgroups      = true     # only where no cgroup hierarchy is writable
  }
}

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

  # Scheduler limits (these are the defaults). A plugin call that takes
  # longer is a failed attempt; a job asking for more allocations (count,
  # times the nodes for system and sysbatch) is refused at submit; an eval
  # places at most max_allocs_per_eval and a follow-up eval the rest.
  # scheduler_call_timeout = "1m"
  # max_allocs_per_job     = 100000
  # max_allocs_per_eval    = 25000

  # Garbage collection (Nomad's keys; these are the defaults). An object is
  # collected once it is terminal and its last change is older than its
  # threshold (>= 0); the core jobs run every interval (1s..24h).
  # eval_gc_threshold             = "1h"
  # batch_eval_gc_threshold       = "24h"
  # job_gc_threshold              = "4h"
  # node_gc_threshold             = "24h"
  # deployment_gc_threshold       = "1h"
  # csi_volume_claim_gc_threshold = "5m"
  # csi_plugin_gc_threshold       = "1h"
  # acl_token_gc_threshold        = "1h"
  # job_gc_interval               = "5m"
  # csi_volume_claim_gc_interval  = "5m"

  server_join {
    retry_join     = ["server1:4647", "server2:4647", "server3:4647"]
    retry_interval = "1s"
    # Agents speak mutual TLS with certificates of the cluster CA, which
    # server1 creates on its first start. server2 and server3 join with the
    # token `drover operator join-token server` prints on server1 (not
    # needed again once they hold a certificate):
    # token = "DRJT-1-..."
  }
}

# Operator-supplied certificates instead of the cluster CA (they win; uncomment with real files):
# tls {
#   rpc                    = true
#   ca_file                = "/etc/drover/tls/ca.pem"
#   cert_file              = "/etc/drover/tls/server.pem"
#   key_file               = "/etc/drover/tls/server-key.pem"
#   verify_server_hostname = true   # server certs must name server.global.drover
#   http                   = true   # the HTTP API over HTTPS, same cert and CA
#   verify_https_client    = true   # ...requiring client certificates of the CA
# }

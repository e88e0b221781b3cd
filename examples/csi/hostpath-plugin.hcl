# The hostpath CSI driver (examples/csi/hostpath) as a system job: every
# client node runs it as a monolith plugin named "hostpath". Build it onto
# the client nodes first, then run this file:
#
#   go build -o /usr/local/bin/drover-csi-hostpath ./examples/csi/hostpath
#   drover job run examples/csi/hostpath-plugin.hcl
#   drover plugin status hostpath
#
# The client gives the driver its socket (CSI_ENDPOINT, inside the plugin's
# mount_dir) and supervises it through the csi-bridge. The task must run as
# root in the host's mount namespace to mount: raw_exec does both (enable it
# on the clients with plugin "raw_exec" { config { enabled = true } }).

variable "driver" {
  type        = string
  description = "Path of the drover-csi-hostpath binary on the client nodes."
  default     = "/usr/local/bin/drover-csi-hostpath"
}

variable "state_dir" {
  type        = string
  description = "Where the driver keeps its volumes and its state, on each node."
  default     = "/var/lib/drover-csi-hostpath"
}

job "csi-hostpath" {
  type        = "system"
  datacenters = ["*"]

  group "plugin" {
    task "driver" {
      driver = "raw_exec"

      config {
        command = var.driver
        args = [
          "-node-id", "${node.unique.id}",
          "-state-dir", var.state_dir,
          "-max-volumes-per-node", "16",
        ]
      }

      csi_plugin {
        id        = "hostpath"
        type      = "monolith"
        mount_dir = "/csi"
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}

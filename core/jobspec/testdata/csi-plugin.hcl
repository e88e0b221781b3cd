# A node plugin of the hostpath driver on every node, and a job that
# writes to a CSI volume.
job "hostpath-plugin" {
  type = "system"

  group "nodes" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = "/usr/local/bin/drover-csi-hostpath"
        args    = ["-endpoint", "unix://${CSI_ENDPOINT}", "-mode", "monolith"]
      }

      csi_plugin {
        id                     = "hostpath"
        type                   = "monolith"
        mount_dir              = "/csi"
        stage_publish_base_dir = "/local/csi"
        health_timeout         = "1m"
      }
    }
  }
}

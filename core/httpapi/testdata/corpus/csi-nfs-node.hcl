# A CSI node plugin run on every client, as CSI driver docs show them.
job "nfs-csi-nodes" {
  datacenters = ["dc1"]
  type        = "system"
  priority    = 60

  group "nodes" {
    task "plugin" {
      driver = "docker"

      config {
        image      = "registry.example/sig-storage/nfsplugin:v4"
        args       = ["--nodeid=${attr.unique.hostname}", "--endpoint=unix:///csi/csi.sock"]
        privileged = true
      }

      csi_plugin {
        id        = "nfs"
        type      = "node"
        mount_dir = "/csi"
      }

      resources {
        memory = 64
      }
    }
  }
}

# A CSI node plugin on every client, with a log shipper beside it.
job "csi-nodes" {
  type        = "system"
  datacenters = ["*"]

  update {
    max_parallel = 1
    stagger      = "10s"
  }

  group "nodes" {
    task "plugin" {
      driver = "docker"

      config {
        image      = "registry.example.com/csi/hostpath:1.11"
        privileged = true
        args       = ["--endpoint=unix:///csi/csi.sock", "--nodeid=${node.unique.id}"]
      }

      csi_plugin {
        id             = "hostpath"
        type           = "node"
        mount_dir      = "/csi"
        health_timeout = "1m"
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }

    task "ship-logs" {
      driver = "docker"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        image = "registry.example.com/vector:0.34"
      }

      logs {
        disabled = true
      }
    }
  }
}

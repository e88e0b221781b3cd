# The controller half of a CSI driver, as a service job of two.
job "ebs-controller" {
  datacenters = ["dc1"]

  group "controller" {
    count = 2

    constraint {
      distinct_hosts = true
    }

    task "plugin" {
      driver = "docker"

      config {
        image = "registry.example/ebs-csi-driver:v1"
        args  = ["controller", "--endpoint=unix://csi/csi.sock", "--logtostderr"]
      }

      csi_plugin {
        id        = "aws-ebs0"
        type      = "controller"
        mount_dir = "/csi"
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}

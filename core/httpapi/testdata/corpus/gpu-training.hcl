# A training job asking for a GPU through a device plugin, with a group
# that keeps its allocations on a disconnected node (refused: drover has
# no device plugins nor a disconnected state).
job "gpu-training" {
  type        = "batch"
  datacenters = ["dc1"]

  group "train" {
    disconnect {
      lost_after = "1h"
      replace    = false
    }

    task "train" {
      driver = "docker"

      config {
        image = "example/train:1.0"
      }

      resources {
        cpu    = 2000
        memory = 4096

        device "nvidia/gpu" {
          count = 1

          constraint {
            attribute = "${device.attr.memory}"
            operator  = ">="
            value     = "8 GiB"
          }
        }
      }
    }
  }
}

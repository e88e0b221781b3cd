job "writer" {
  type = "sysbatch"

  group "w" {
    count = 2

    volume "data" {
      type            = "csi"
      source          = "data"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      per_alloc       = true

      mount_options {
        fs_type     = "ext4"
        mount_flags = ["noatime"]
      }
    }

    volume "config" {
      type            = "csi"
      source          = "config"
      read_only       = true
      access_mode     = "multi-node-reader-only"
      attachment_mode = "file-system"
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "date > /data/out"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
      }

      volume_mount {
        volume      = "config"
        destination = "/etc/app"
        read_only   = true
      }
    }
  }
}

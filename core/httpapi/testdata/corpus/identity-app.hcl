# A workload identity for a third-party system: drover issues none.
job "uploader" {
  datacenters = ["dc1"]
  type        = "batch"

  group "upload" {
    task "upload" {
      driver = "raw_exec"

      identity {
        name = "aws"
        aud  = ["sts.amazonaws.com"]
        file = true
      }

      config {
        command = "/usr/local/bin/upload"
      }
    }
  }
}

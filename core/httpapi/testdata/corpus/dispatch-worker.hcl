# A parameterized batch job dispatched with a path and an optional payload.
job "transcode" {
  type        = "batch"
  datacenters = ["dc1"]

  parameterized {
    payload       = "optional"
    meta_required = ["input"]
    meta_optional = ["preset"]
  }

  group "work" {
    task "ffmpeg" {
      driver = "raw_exec"

      dispatch_payload {
        file = "settings.json"
      }

      config {
        command = "/usr/bin/ffmpeg"
        args    = ["-i", "${NOMAD_META_input}", "-preset", "${NOMAD_META_preset}"]
      }

      kill_timeout = "30s"
      kill_signal  = "SIGINT"

      logs {
        max_files     = 3
        max_file_size = 20
      }
    }
  }
}

# A batch job that is both periodic (disabled) and parameterized.
job "report" {
  type = "batch"

  periodic {
    crons            = ["0 3 * * *", "@hourly"]
    enabled          = false
    prohibit_overlap = true
    time_zone        = "Europe/Paris"
  }

  parameterized {
    payload       = "required"
    meta_required = ["customer"]
    meta_optional = ["format", "locale"]
  }

  group "run" {
    count            = 0
    max_run_duration = "1h30m"

    reschedule {
      attempts = 2
    }

    task "report" {
      driver = "raw_exec"

      dispatch_payload {
        file = "request.json"
      }

      config {
        command = "/usr/bin/report"
        args    = ["--customer", "${NOMAD_META_customer}", "--in", "${NOMAD_TASK_DIR}/request.json"]
      }

      resources {
        cores  = 2
        memory = 1024
      }

      logs {
        disabled = true
      }
    }
  }
}

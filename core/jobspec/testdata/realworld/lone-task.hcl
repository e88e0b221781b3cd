# A one-task job written without a group, as Nomad allows: the task is a
# group of its own, named after it.
job "cleanup" {
  type = "batch"

  reschedule {
    attempts  = 1
    interval  = "1h"
    unlimited = false
  }

  task "sweep" {
    driver = "raw_exec"

    config {
      command = "/usr/bin/find"
      args    = ["/tmp", "-mtime", "+7", "-delete"]
    }
  }

  group "report" {
    task "mail" {
      driver = "exec"

      config {
        command = "/usr/local/bin/report"
      }
    }
  }
}

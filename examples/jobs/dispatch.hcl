# A parameterized sysbatch job: nothing runs until it is dispatched.
#   drover job dispatch -meta name=world greet input.txt
# Each dispatch is a child job greet/dispatch-<unix>-<id> that runs on every
# eligible node.
job "greet" {
  type        = "sysbatch"
  datacenters = ["*"]

  parameterized {
    payload       = "optional"
    meta_required = ["name"]
  }

  group "greet" {
    task "greet" {
      driver = "raw_exec"

      # The dispatch payload, if any, is written to local/input.txt.
      dispatch_payload {
        file = "input.txt"
      }

      config {
        command = "/bin/sh"
        # ${NOMAD_META_name} is a runtime interpolation: the job file keeps
        # it verbatim and the client fills it from the dispatch meta.
        args = ["-c", "echo hello ${NOMAD_META_name}; cat local/input.txt 2>/dev/null || true"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}

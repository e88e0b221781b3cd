# Runtime interpolations are kept verbatim; HCL escapes still apply.
job "interp" {
  type = "sysbatch"

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  constraint {
    attribute = "${meta["rack.id"]}"
    operator  = "is_set"
  }

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args = [
          "-c",
          "echo ${NOMAD_ALLOC_ID} on ${node.unique.id} in ${attr.unique.hostname}",
          "literal $${NOT_INTERPOLATED} and a tab:\t.",
        ]
        script = <<-EOT
          #!/bin/sh
          echo "${NOMAD_TASK_NAME}"
          echo "${env.HOME}"
        EOT
      }

      env {
        ALLOC = "${NOMAD_ALLOC_INDEX}"
        BOTH  = "${node.class}-${node.datacenter}"
      }
    }
  }
}

# A batch job written with HCL2 input variables, locals and a dynamic
# block. Run it with:
#   drover job run -var 'greeting=hi' -var 'names=["ann","bob"]' examples/jobs/variables.hcl
# or set NOMAD_VAR_greeting, or pass -var-file with `greeting = "hi"`.
variable "greeting" {
  type        = string
  default     = "hello"
  description = "What each task says."
  validation {
    condition     = strlen(var.greeting) > 0 && strlen(var.greeting) <= 40
    error_message = "The greeting must be 1 to 40 characters."
  }
}

variable "names" {
  type    = list(string)
  default = ["world"]
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

locals {
  # One task per name, named after it.
  tasks = { for n in var.names : lower(n) => "${title(var.greeting)}, ${n}!" }
}

job "greetings" {
  type        = "batch"
  datacenters = var.datacenters

  meta = {
    names = join(",", var.names)
  }

  group "greet" {
    dynamic "task" {
      for_each = local.tasks
      labels   = ["greet-${task.key}"]

      content {
        driver = "raw_exec"

        config {
          command = "/bin/sh"
          # $NOMAD_ALLOC_NAME is left for the task's shell; ${task.value}
          # is the greeting, computed when the job file is parsed.
          args = ["-c", "echo '${task.value}' from $NOMAD_ALLOC_NAME"]
        }

        resources {
          cpu    = 50
          memory = 32
        }
      }
    }
  }
}

# Input variables with validation, locals, functions and a dynamic task
# block: one task per worker name.
variable "workers" {
  type    = list(string)
  default = ["alpha", "beta"]

  validation {
    condition     = length(var.workers) > 0
    error_message = "At least one worker is needed."
  }
}

variable "memory" {
  type    = number
  default = 128
}

locals {
  prefix = upper("q")
  tags   = [for w in var.workers : "${local.prefix}-${w}"]
}

job "queue-workers" {
  datacenters = ["dc1", "dc2"]
  type        = "batch"
  meta = {
    tags = join(",", local.tags)
  }

  group "workers" {
    dynamic "task" {
      for_each = var.workers
      labels   = [task.value]

      content {
        driver = "raw_exec"

        config {
          command = "/bin/echo"
          args    = ["worker", task.value]
        }

        resources {
          memory = var.memory
        }
      }
    }
  }
}

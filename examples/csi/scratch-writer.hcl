# A batch job that claims the scratch volume for writing, mounts it at
# /scratch in its task and leaves a file there; the claim is released when
# the task ends:
#
#   drover job run examples/csi/scratch-writer.hcl
#   drover volume status scratch     # no allocations once the job is done
job "scratch-writer" {
  type = "batch"

  group "write" {
    volume "scratch" {
      type            = "csi"
      source          = "scratch"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }

    task "write" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "date > \"$NOMAD_TASK_DIR/../scratch/written-by-$NOMAD_ALLOC_ID\" && ls -l \"$NOMAD_TASK_DIR/../scratch\""]
      }

      volume_mount {
        volume      = "scratch"
        destination = "/scratch"
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}

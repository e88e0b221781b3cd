package harness

// TrueJob is the smallest sysbatch job: one /bin/true per node. Format it
// with the job ID (%q).
const TrueJob = `job %q {
  type        = "sysbatch"
  datacenters = ["*"]

  group "g" {
    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/true"
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

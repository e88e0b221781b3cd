# The smallest useful job: every default comes from parse and Canonicalize.
job "minimal" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}

# Run once on every Linux node of the pool: prune old files.
job "prune-tmp" {
  type      = "sysbatch"
  node_pool = "all"

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  group "prune" {
    task "find" {
      driver = "raw_exec"
      user   = "nobody"

      config {
        command = "/usr/bin/find"
        args    = ["/tmp", "-mtime", "+7", "-delete"]
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}

job "web" {
  name        = "Web Frontend"
  type        = "service"
  datacenters = ["dc1", "dc2-*"]
  node_pool   = "edge"
  priority    = 70
  namespace   = "prod"
  region      = "eu"
  all_at_once = true

  meta {
    owner = "team-a"
    tier  = 1
    beta  = true
  }

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  constraint {
    distinct_hosts = true
  }

  constraint {
    attribute = "${attr.nomad.version}"
    version   = ">= 1.6"
  }

  affinity {
    attribute = "${node.datacenter}"
    value     = "dc1"
    weight    = -20
  }

  spread {
    attribute = "${node.datacenter}"
    weight    = 80
    target "dc1" {
      percent = 70
    }
    target "dc2" {
      percent = 30
    }
  }

  update {
    max_parallel      = 2
    stagger           = "10s"
    health_check      = "task_states"
    min_healthy_time  = "15s"
    healthy_deadline  = "4m"
    progress_deadline = "9m"
    auto_revert       = true
    auto_promote      = false
    canary            = 1
  }

  group "frontend" {
    count = 3

    meta = {
      "release.channel" = "stable"
    }

    constraint {
      distinct_property = "${meta.rack}"
    }

    constraint {
      attribute = "${meta.zone}"
      operator  = "!="
      value     = "z9"
    }

    affinity {
      attribute    = "${attr.cpu.arch}"
      set_contains = "amd64"
    }

    update {
      max_parallel = 1
      canary       = 0
    }

    restart {
      attempts = 4
      mode     = "delay"
    }

    reschedule {
      delay          = "1m"
      delay_function = "fibonacci"
    }

    migrate {
      max_parallel     = 2
      health_check     = "checks"
      min_healthy_time = "20s"
      healthy_deadline = "3m"
    }

    ephemeral_disk {
      size    = 500
      sticky  = true
      migrate = true
    }

    shutdown_delay = "5s"

    task "server" {
      driver      = "raw_exec"
      user        = "nobody"
      leader      = true
      kill_signal = "SIGINT"

      kill_timeout = "20s"

      config {
        command = "/usr/local/bin/server"
        args    = ["-port", 8080, "-ratio", 0.25, "-v"]
        verbose = true
        labels = {
          app  = "web"
          node = "${node.unique.name}"
        }
        port_map {
          http  = 8080
          admin = 9090
        }
        mount {
          source = "/a"
        }
        mount {
          source = "/b"
        }
      }

      env {
        DC      = "Running on ${node.datacenter}"
        VERSION = "v${NOMAD_META_version}"
        PLAIN   = 42
      }

      resources {
        cpu        = 500
        memory     = 256
        memory_max = 512
        disk       = 100
        iops       = 10
      }

      restart {
        attempts = 1
      }

      logs {
        max_files     = 3
        max_file_size = 5
      }

      meta {
        role = "api"
      }

      constraint {
        regexp = "^x86"
        attribute = "${attr.cpu.modelname}"
      }

      affinity {
        attribute = "${node.class}"
        value     = "fast"
      }
    }

    task "sidecar" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["infinity"]
      }
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      env = {
        "WITH.DOT" = "yes"
      }
    }
  }
}

# A federated deployment across two regions (Nomad Enterprise's
# multiregion block, which Nomad's CLI parses in every edition).
job "geo-api" {
  type = "service"

  multiregion {
    strategy {
      max_parallel = 1
      on_failure   = "fail_all"
    }

    region "west" {
      count       = 2
      datacenters = ["west-1"]
      meta {
        tier = "primary"
      }
    }

    # No count: Nomad deploys one of each group there.
    region "east" {
      datacenters = ["east-1", "east-2"]
      node_pool   = "edge"
    }
  }

  group "api" {
    count = 0

    task "api" {
      driver = "docker"

      config {
        image = "registry.example.com/geo-api:5"
      }
    }
  }
}

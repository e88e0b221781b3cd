# A parameterized video renderer: each dispatch carries its scene as the
# payload and its quality as meta.
job "render" {
  type        = "batch"
  datacenters = ["dc1"]

  parameterized {
    payload       = "required"
    meta_required = ["scene_id"]
    meta_optional = ["quality"]
  }

  meta {
    quality = "draft"
  }

  group "render" {
    task "render" {
      driver = "exec"

      dispatch_payload {
        file = "scene.json"
      }

      config {
        command = "/opt/render/bin/render"
        args    = ["--scene", "local/scene.json", "--quality", "${NOMAD_META_quality}"]
      }

      resources {
        cpu    = 4000
        memory = 4096
      }
    }

    task "upload" {
      driver = "exec"

      lifecycle {
        hook = "poststop"
      }

      config {
        command = "/opt/render/bin/upload"
      }
    }
  }
}

# Secrets from Vault: drover has no Vault integration.
job "billing" {
  datacenters = ["dc1"]

  group "billing" {
    task "app" {
      driver = "raw_exec"

      config {
        command = "/usr/local/bin/billing"
      }

      vault {
        policies = ["billing-read"]
      }

      template {
        destination = "secrets/db.env"
        env         = true
        data        = <<-EOF
          {{ with secret "kv/data/billing" }}DB_PASSWORD={{ .Data.data.password }}{{ end }}
        EOF
      }
    }
  }
}

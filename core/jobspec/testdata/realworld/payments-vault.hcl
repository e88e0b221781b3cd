# An API that reads its database credentials from Vault, with a workload
# identity, the vault block written at each level Nomad allows.
job "payments" {
  datacenters = ["dc1"]

  vault {
    policies = ["payments-read"]
  }

  group "api" {
    count = 2

    vault {
      policies      = ["payments-db"]
      change_mode   = "signal"
      change_signal = "SIGUSR1"
    }

    network {
      port "http" {}
    }

    service {
      provider = "nomad"
      name     = "payments-api"
      port     = "http"
    }

    task "migrate" {
      driver = "docker"

      lifecycle {
        hook    = "prestart"
        sidecar = false
      }

      vault {
        policies    = ["payments-migrate"]
        namespace   = "finance"
        env         = false
        disable_file = true
      }

      config {
        image = "registry.example.com/payments/migrate:1.0"
      }
    }

    task "api" {
      driver = "docker"

      identity {
        env  = true
        file = true
      }

      config {
        image = "registry.example.com/payments/api:3.2"
        ports = ["http"]
      }

      template {
        data        = <<EOT
{{ with secret "database/creds/payments" }}
DB_USER={{ .Data.username }}
DB_PASS={{ .Data.password }}
{{ end }}
EOT
        destination = "secrets/db.env"
        env         = true
        change_mode = "restart"
      }

      template {
        data        = "{{ with secret \"pki/issue/payments\" \"common_name=payments.internal\" }}{{ .Data.certificate }}{{ end }}"
        destination = "secrets/tls.crt"
        change_mode = "script"

        change_script {
          command       = "/usr/local/bin/reload-tls"
          args          = ["--graceful"]
          fail_on_error = true
        }
      }

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }

  group "worker" {
    task "settle" {
      driver = "exec"

      config {
        command = "/usr/local/bin/settle"
      }
    }
  }
}

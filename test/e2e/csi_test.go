package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// hostpathPluginJob runs the repository's hostpath CSI driver as a system
// job's task: the client gives it its socket (CSI_ENDPOINT) and
// supervises it through the csi-bridge.
const hostpathPluginJob = `job "hostpath-plugin" {
  type        = "system"
  datacenters = ["*"]

  group "nodes" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = %q
        args    = ["-state-dir", "${NOMAD_ALLOC_DIR}/hostpath", "-node-id", "${node.unique.id}"]
      }

      csi_plugin {
        id             = "hostpath"
        type           = "monolith"
        health_timeout = "1m"
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
`

const hostpathVolume = `id          = "e2e-data"
name        = "e2e-data"
type        = "csi"
plugin_id   = "hostpath"
external_id = "e2e-data"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

secrets {
  token = "s3cr3t"
}
`

// The hostpath driver runs as a job on the dev agent: its plugin becomes
// healthy with a controller and a node instance, a volume registers
// against it (secrets never shown), and stopping the plugin job takes the
// instances away.
func TestCSIHostpathPluginOnDevAgent(t *testing.T) {
	t.Parallel()
	binDir := t.TempDir()
	bin := filepath.Join(binDir, "drover-csi-hostpath")
	build := exec.Command(harness.GoTool(), "build", "-o", bin, "./examples/csi/hostpath")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the hostpath driver: %v\n%s", err, out)
	}
	a := startAgent(t)
	a.MustCLI("job", "run", harness.WriteFile(t, "plugin.hcl", fmt.Sprintf(hostpathPluginJob, bin)))

	type plugin struct {
		ID                               string
		ControllersHealthy, NodesHealthy int
		Provider                         string
		Nodes, Controllers               map[string]struct{ Healthy bool }
		Allocations                      []struct{ ID string }
	}
	var p plugin
	harness.WaitFor(t, waitTimeout, "the hostpath plugin to be healthy", func() (bool, string) {
		status, err := a.Do("GET", "/v1/plugin/csi/hostpath", nil, &p)
		if err != nil || status != 200 {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		return p.NodesHealthy == 1 && p.ControllersHealthy == 1, fmt.Sprintf("%+v", p)
	})
	if p.Provider != "hostpath.csi.drover.dev" || p.Nodes[a.NodeID()].Healthy != true || len(p.Allocations) != 1 {
		t.Errorf("plugin: %+v", p)
	}
	out := a.MustCLI("plugin", "status")
	if !strings.Contains(out.Stdout, "hostpath") || !strings.Contains(out.Stdout, "1/0") {
		t.Errorf("plugin status:\n%s", out.Stdout)
	}

	a.MustCLI("volume", "register", harness.WriteFile(t, "vol.hcl", hostpathVolume))
	st := a.MustCLI("volume", "status", "e2e-data")
	for _, want := range []string{"Schedulable          = true", "Plugin ID            = hostpath", "Nodes Healthy        = 1"} {
		if !strings.Contains(st.Stdout, want) {
			t.Errorf("volume status lacks %q:\n%s", want, st.Stdout)
		}
	}
	if raw := a.MustCLI("volume", "status", "-json", "e2e-data"); strings.Contains(raw.Stdout, "s3cr3t") || !strings.Contains(raw.Stdout, "[REDACTED]") {
		t.Errorf("volume JSON shows its secret:\n%s", raw.Stdout)
	}
	a.MustCLI("volume", "deregister", "e2e-data")

	a.MustCLI("job", "stop", "-purge", "hostpath-plugin")
	harness.WaitFor(t, waitTimeout, "the plugin to go", func() (bool, string) {
		status, err := a.Do("GET", "/v1/plugin/csi/hostpath", nil, &p)
		return status == 404, fmt.Sprintf("%d %v %+v", status, err, p)
	})
	// The driver process left with its task.
	if procs := harness.ProcsOf(bin); len(procs) != 0 {
		harness.WaitFor(t, waitTimeout, "the driver to exit", func() (bool, string) {
			left := harness.StillAlive(procs)
			return len(left) == 0, fmt.Sprint(left)
		})
	}
	_ = os.Remove(bin)
}

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// pythonPlugin is the file name of the Python example plugin in
// plugin_dir, and so the name of its stanza.
const pythonPlugin = "scheduler-python-oneshot"

// pythonJob is a job of the Python plugin's type: one `echo hi` that exits
// 0 (the task is named "hi", as checkRanOnce reads it).
const pythonJob = `job %q {
  type        = "python-oneshot"
  datacenters = ["*"]

  group "g" {
    task "hi" {
      driver = "raw_exec"

      config {
        command = "/bin/echo"
        args    = ["hi"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// A scheduler plugin written in Python without drover's Go SDK
// (examples/plugins/python-oneshot: an executable script in plugin_dir,
// linked there) is launched by the agent like any plugin: it declares its
// job type, a job of that type runs to completion once with raw_exec, the
// agent reports it healthy, and its log lines arrive in the agent's log,
// structured, with no warning or error about it from launch to exit. Its
// config block reaches it through the base protocol, and one it refuses
// stops the agent's start at the block's position.
func TestPythonSchedulerPlugin(t *testing.T) {
	t.Parallel()
	script := filepath.Join(repoRoot, "examples", "plugins", "python-oneshot", "plugin.py")
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skipf("no /usr/bin/python3 (plugin.py's interpreter): %v", err)
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Skipf("/usr/bin/python3 lacks the grpc or protobuf module (apt-get install python3-grpcio python3-protobuf): %v\n%s", err, out)
	}
	pluginDir := t.TempDir()
	// A link keeps the script next to its stubs (droverpb/): Python looks
	// for its imports in the directory of the file the link points to.
	if err := os.Symlink(script, filepath.Join(pluginDir, pythonPlugin)); err != nil {
		t.Fatal(err)
	}
	// A refused config block stops the agent's start at the block's
	// position, naming the plugin and the field, with the Python plugin's
	// own rule; no plugin process is left behind.
	bad := harness.WriteFile(t, "bad.hcl", fmt.Sprintf(
		"plugin_dir = %q\n\nplugin %q {\n  config {\n    max_allocs_per_node = -1\n  }\n}\n", pluginDir, pythonPlugin))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, droverBin, "agent", "-dev", "-http-port", "0", "-rpc-port", "0",
		"-data-dir", t.TempDir(), "-config", bad).CombinedOutput()
	want := fmt.Sprintf(`bad.hcl:5:27: plugin %q: config max_allocs_per_node: must be a whole number of at least 0`, pythonPlugin)
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("agent start with a refused config block: err %v, want an error containing %q; output:\n%s", err, want, out)
	}

	cfg := harness.WriteFile(t, "plugins.hcl", fmt.Sprintf(
		"plugin_dir = %q\n\nplugin %q {\n  config {\n    max_allocs_per_node = 2\n  }\n}\n", pluginDir, pythonPlugin))
	a := startAgent(t, "-config", cfg)

	p := a.pluginRow(pythonPlugin)
	if p.Kind != "scheduler" || p.Builtin || p.Version != "0.1.0" || p.Health != "healthy" ||
		len(p.JobTypes) != 1 || p.JobTypes[0].Name != "python-oneshot" {
		t.Errorf("/v1/agent/plugins reports %+v; want a healthy third-party scheduler, version 0.1.0, serving python-oneshot", p)
	}

	const id = "e2e-python-oneshot"
	var parsed any
	a.MustWrite(http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": fmt.Sprintf(pythonJob, id), "Canonicalize": true}, &parsed)
	var resp registerResponse
	a.MustWrite(http.MethodPut, "/v1/jobs", map[string]any{"Job": parsed}, &resp)
	if resp.EvalID == "" {
		t.Fatalf("registering %s created no evaluation", id)
	}
	a.waitEvalComplete(resp.EvalID)
	a.checkRanOnce(id)

	// The agent stops the plugin as it stops: go-plugin's Shutdown, which
	// the plugin answers by exiting.
	a.stop()
	log := a.log()
	// go-plugin logs the plugin's stderr under the plugin's logger, named
	// after the binary.
	prefix := "drover.plugins." + pythonPlugin + "." + pythonPlugin
	if !strings.Contains(log, "[INFO]  "+prefix+": serving:") || !strings.Contains(log, "job_type=python-oneshot") {
		t.Errorf("the agent's log has no structured info line %q from the plugin", prefix+": serving")
	}
	if !strings.Contains(log, prefix+": config set:") || !strings.Contains(log, "max_allocs_per_node=2") {
		t.Errorf("the agent's log has no line %q with max_allocs_per_node=2: the plugin did not get its config block", prefix+": config set")
	}
	if !strings.Contains(log, "[INFO]  "+prefix+": plugin exited:") {
		t.Errorf("the agent's log has no line %q: the plugin did not exit by itself on the agent's stop", prefix+": plugin exited")
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, pythonPlugin) && (strings.Contains(line, "[WARN]") || strings.Contains(line, "[ERROR]")) {
			t.Errorf("the agent logged about the plugin: %s", line)
		}
	}
}

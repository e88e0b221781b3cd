package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent config whose values break their rules (num_schedulers =
// 1000000 once started a million scheduler workers and took the API down)
// stops `drover agent` before it starts anything: exit 1, one line per
// problem with file:line:col, the key and the rule, in an HCL and in a
// JSON file alike, and no data written.
func TestAgentStartRefusesOutOfBoundsConfig(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"hcl", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			dir, tmp := t.TempDir(), t.TempDir()
			dataDir := filepath.Join(dir, "data")
			path := filepath.Join(dir, "agent."+format)
			var src string
			var at [2]string
			if format == "hcl" {
				src = fmt.Sprintf("data_dir = %q\nlog_level = \"verbose\"\nserver {\n  enabled = true\n  num_schedulers = 1000000\n}\n", dataDir)
				at = [2]string{path + ":5:20: ", path + ":2:13: "}
			} else {
				src = fmt.Sprintf("{\n  \"data_dir\": %q,\n  \"log_level\": \"verbose\",\n  \"server\": {\"enabled\": true, \"num_schedulers\": 1000000}\n}\n", dataDir)
				at = [2]string{path + ":4:49: ", path + ":3:16: "}
			}
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			fs := runFailingAgent(t, tmp, "-config", path)
			if fs.code != 1 {
				t.Errorf("exit status %d; want 1", fs.code)
			}
			for _, w := range []string{
				"Error loading agent config: ",
				at[0] + "server.num_schedulers: must be 0 (the default) or between 1 and 128 (got 1000000)",
				at[1] + `log_level: must be one of trace, debug, info, warn, error (got "verbose")`,
			} {
				if !strings.Contains(fs.output, w) {
					t.Errorf("output does not say %q", w)
				}
			}
			if strings.Contains(fs.output, "agent started") {
				t.Error("the agent started")
			}
			if _, err := os.Stat(dataDir); err == nil {
				t.Error("the refused agent created its data dir")
			}
			if t.Failed() {
				t.Logf("--- agent output ---\n%s", fs.output)
			}
		})
	}
}

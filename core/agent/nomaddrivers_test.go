package agent

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/sdk/shared"
)

// A Nomad client config's `plugin "raw_exec" { config { enabled = … } }`
// configures the built-in raw_exec driver: no binary in plugin_dir is
// looked for, and enabled = false turns the driver off.
func TestAgentNomadRawExecStanza(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(map[bool]string{true: "enabled", false: "disabled"}[enabled], func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "extra.hcl")
			src := "plugin \"raw_exec\" {\n  config {\n    enabled = false\n  }\n}\n"
			if enabled {
				src = "plugin \"raw_exec\" {\n  config {\n    enabled = true\n  }\n}\n"
			}
			writeFile(t, path, []byte(src), 0o600)
			cfg, err := LoadConfig(true, path)
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = filepath.Join(dir, "data")
			cfg.Ports.RPC = freePort(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			logs := &lockedBuffer{}
			a, err := New(cfg, Options{
				Logger:  hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs}),
				SelfExe: os.Args[0], HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"},
			})
			if err != nil {
				t.Fatalf("New: %v\n%s", err, logs)
			}
			defer a.Shutdown()
			drivers := a.Plugins().Plugins(shared.KindDriver)
			if got := slices.Contains(drivers, "driver-rawexec"); got != enabled {
				t.Errorf("driver plugins %v; want driver-rawexec running: %v", drivers, enabled)
			}
		})
	}
}

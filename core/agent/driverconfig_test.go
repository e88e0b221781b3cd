package agent

import (
	"context"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/plugins/builtin"
	docker "github.com/drover-org/drover/plugins/driver-docker"
	execdriver "github.com/drover-org/drover/plugins/driver-exec"
	mock "github.com/drover-org/drover/plugins/driver-mock"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	"github.com/drover-org/drover/sdk/shared"
)

// driverChecker runs the built-in driver plugins unconfigured, as the
// agent does to have them judge their stanzas' config at start.
func driverChecker(t *testing.T) *pluginhost.DriverSet {
	t.Helper()
	env := []string{testPluginEnv + "=1", "GORACE=atexit_sleep_ms=0"}
	h, err := pluginhost.New(t.Context(), pluginhost.Config{
		Logger:  hclog.New(&hclog.LoggerOptions{Name: "plugins", Output: t.Output(), Level: hclog.Warn}),
		SelfExe: os.Args[0],
		Builtins: []pluginhost.Builtin{
			{Name: rawexecPlugin, Kind: shared.KindDriver, Env: env},
			{Name: dockerPlugin, Kind: shared.KindDriver, Env: env},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h.Drivers()
}

// checkStanzas is what the agent's start asks of the driver plugins
// about the Nomad driver stanzas of c.
func checkStanzas(ds *pluginhost.DriverSet, c *Config) error {
	checks, err := driverConfigChecks(c.Plugins)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return checkDriverConfigs(ctx, ds, checks)
}

// A driver stanza's config the plugin refuses stops the agent's start,
// naming the stanza's position, the plugin, the field and the rule; no
// plugin is left running.
func TestAgentStartRefusesDriverConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "extra.hcl")
	writeFile(t, path, []byte("plugin \"docker\" {\n  config {\n    gc {\n      image_delay = \"later\"\n    }\n  }\n}\n"), 0o600)
	cfg, err := LoadConfig(true, path)
	if err != nil {
		t.Fatalf("the config parses (its values are the plugin's to judge): %v", err)
	}
	cfg.DataDir = filepath.Join(dir, "data")
	_, err = New(cfg, Options{Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], PluginEnv: []string{testPluginEnv + "=1"}})
	want := path + `:2:3: plugin "docker": docker plugin config: gc.image_delay "later" must be a non-negative duration`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: %v, want an error containing %q", err, want)
	}
}

// The exec and mock_driver stanzas are checked like raw_exec's: a key the
// driver does not take at its file:line:col, a value it refuses by the
// plugin, before anything starts.
func TestAgentStartRefusesExecAndMockConfig(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"exec key", "plugin \"exec\" {\n  config {\n    chroot_env = true\n  }\n}\n",
			`:3:5: plugin "exec": config chroot_env is not supported by drover's built-in exec driver (supported: allow_caps, default_ipc_mode, default_pid_mode, no_pivot_root)`},
		{"exec value", "plugin \"exec\" {\n  config {\n    default_pid_mode = \"shared\"\n  }\n}\n",
			`plugin "exec": exec plugin config: default_pid_mode "shared" must be "private" or "host"`},
		{"exec type", "plugin \"exec\" {\n  config {\n    allow_caps = \"all\"\n  }\n}\n",
			`:3:18: plugin "exec": config allow_caps must be a list of string`},
		{"mock value", "plugin \"mock_driver\" {\n  config {\n    fs_isolation = \"vm\"\n  }\n}\n",
			`plugin "mock_driver": mock_driver plugin config: fs_isolation "vm" must be one of none, chroot, image`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "extra.hcl")
			writeFile(t, path, []byte(tc.src), 0o600)
			cfg, err := LoadConfig(true, path)
			if err == nil {
				cfg.DataDir = filepath.Join(dir, "data")
				var a *Agent
				a, err = New(cfg, Options{Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], PluginEnv: []string{testPluginEnv + "=1"}})
				if err == nil {
					a.Shutdown()
				}
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The agent knows the built-ins by name and kind only; the drover binary's
// catalog serves them. Both must list the same plugins in the same order
// (it decides job-type ties), and the agent must hand each driver its
// config in the variable the driver reads.
func TestBuiltinPluginsMatchCatalog(t *testing.T) {
	var agent, catalog []string
	for _, p := range builtinPlugins {
		agent = append(agent, p.name+"/"+p.kind)
	}
	for _, p := range builtin.Catalog {
		catalog = append(catalog, p.Name+"/"+p.Kind)
	}
	if !slices.Equal(agent, catalog) {
		t.Errorf("agent's built-ins %v, the binary's catalog %v", agent, catalog)
	}
	for driverName, want := range map[string]string{rawexec.Name: rawexec.ConfigEnvVar, docker.Name: docker.ConfigEnvVar,
		execdriver.Name: execdriver.ConfigEnvVar, mock.Name: mock.ConfigEnvVar} {
		if got := nomadDrivers[driverName].configEnv; got != want {
			t.Errorf("%s config variable %q, the plugin reads %q", driverName, got, want)
		}
	}
}

// The agent reaches its plugins through their protocols only: no file of
// the core but tests (whose binary serves the built-ins) imports plugins/.
func TestCoreImportsNoPlugin(t *testing.T) {
	const plugins = "github.com/drover-org/drover/plugins/"
	root := filepath.Join("..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "/testdata/") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, plugins) {
				t.Errorf("%s imports %s; the core speaks to plugins through their protocol", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no core source found")
	}
}

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/gc/golden"
	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/proto/gcpb"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// The third-party test plugin of these tests: a scheduler whose config
// names the job type it serves, so an agent shows it honours the config.
func init() {
	testPlugins["test-config-sched"] = serveConfigSched
}

// configSchedSpec is the test plugin's config schema:
//
//	job_type = "configured"          # must not be empty
//	pool "name" { size = 1 }         # size at most 100
var configSchedSpec = &basepb.Spec{
	Attributes: []*basepb.Attribute{{Name: "job_type", Type: "string", DefaultJson: `"configured"`}},
	Blocks: []*basepb.Block{{Name: "pool", Nesting: basepb.Block_NESTING_MAP,
		Body: &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "size", Type: "number", Required: true}}}}},
}

type configSched struct {
	basepb.UnimplementedBaseServer
	mu      sync.Mutex
	jobType string // "" until configured
}

func serveConfigSched() {
	s := &configSched{}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins:         plugin.PluginSet{shared.KindScheduler: &scheduler.Plugin{Impl: s}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			g := grpc.NewServer(append(opts, shared.ServerOptions()...)...)
			basepb.RegisterBaseServer(g, s)
			return g
		},
		Logger: scheduler.NewLogger(shared.KindScheduler),
	})
}

func (s *configSched) ConfigSchema(context.Context, *basepb.ConfigSchemaRequest) (*basepb.ConfigSchemaResponse, error) {
	return &basepb.ConfigSchemaResponse{Spec: configSchedSpec}, nil
}

func (s *configSched) SetConfig(_ context.Context, req *basepb.SetConfigRequest) (*basepb.SetConfigResponse, error) {
	var cfg struct {
		JobType string `json:"job_type"`
		Pool    map[string]struct {
			Size float64 `json:"size"`
		} `json:"pool"`
	}
	if err := json.Unmarshal(req.GetConfigJson(), &cfg); err != nil {
		return nil, err
	}
	var fes []*basepb.FieldError
	if cfg.JobType == "" {
		fes = append(fes, &basepb.FieldError{Path: "job_type", Message: "must not be empty"})
	}
	for name, p := range cfg.Pool {
		if p.Size > 100 {
			fes = append(fes, &basepb.FieldError{Path: fmt.Sprintf("pool[%q].size", name), Message: "must be at most 100"})
		}
	}
	if len(fes) == 0 {
		s.mu.Lock()
		s.jobType = cfg.JobType
		s.mu.Unlock()
	}
	return &basepb.SetConfigResponse{FieldErrors: fes}, nil
}

func (s *configSched) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jobType == "" {
		return nil, errors.New("info before SetConfig")
	}
	return &schedulerpb.InfoResponse{Name: "config-sched", Version: "1",
		JobTypes: []*schedulerpb.JobTypeInfo{{Name: s.jobType, MaxAttempts: 1}}}, nil
}

func (s *configSched) Schedule(context.Context, *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	return &schedulerpb.ScheduleResponse{}, nil
}

// configFile renders an agent config with plugin_dir and a "cfg" stanza
// whose config block sets job_type (and a pool of size), as HCL or JSON.
// It returns the file's text and the line:col of job_type's value and of
// the pool's size value.
func configFile(format, pluginDir, jobType string, size int) (src, jobTypeAt, sizeAt string) {
	if format == "json" {
		src = fmt.Sprintf(`{
  "plugin_dir": %q,
  "plugin": {
    "cfg": {
      "config": {
        "job_type": %q,
        "pool": {
          "main": {
            "size": %d
          }
        }
      }
    }
  }
}
`, pluginDir, jobType, size)
		return src, "6:21", "9:21"
	}
	src = fmt.Sprintf(`plugin_dir = %q
plugin "cfg" {
  config {
    job_type = %q
    pool "main" {
      size = %d
    }
  }
}
`, pluginDir, jobType, size)
	return src, "4:16", "6:14"
}

// The config block of a plugin stanza reaches the plugin host as a body
// that keeps its positions, from an HCL and a JSON agent config alike:
// decoded against a schema it gives the same value, and a refused field
// is found at its line and column in the file.
func TestPluginConfigBodyHCLAndJSON(t *testing.T) {
	for _, format := range []string{"hcl", "json"} {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "agent."+format)
			src, jobTypeAt, sizeAt := configFile(format, "/opt/p", "custom", 500)
			writeFile(t, path, []byte(src), 0o600)
			cfg, err := LoadConfig(true, path)
			if err != nil {
				t.Fatal(err)
			}
			stanzas, err := pluginStanzas(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(stanzas) != 1 || stanzas[0].Name != "cfg" || stanzas[0].Config == nil {
				t.Fatalf("stanzas = %+v", stanzas)
			}
			body := stanzas[0].Config
			raw, diags := base.Decode(configSchedSpec, body)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if want := `{"job_type":"custom","pool":{"main":{"size":500}}}`; string(raw) != want {
				t.Errorf("decoded %s, want %s", raw, want)
			}
			for p, want := range map[string]string{"job_type": jobTypeAt, `pool["main"].size`: sizeAt} {
				r := base.FieldRange(configSchedSpec, body, p, hcl.Range{})
				if got := fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column); got != path+":"+want {
					t.Errorf("%s is at %s, want %s:%s", p, got, path, want)
				}
			}
		})
	}
}

// A stanza may hold nested blocks in its config (the plugin's schema
// decides), but one config block at most, and nothing else.
func TestPluginStanzaShape(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"nested blocks", "plugin \"p\" {\n  config {\n    pool \"a\" { size = 1 }\n  }\n}\n", ""},
		{"two config blocks", "plugin \"p\" {\n  config {}\n  config {}\n}\n", `agent.hcl:3:3: plugin "p": only one config block is allowed`},
		{"stray attribute", "plugin \"p\" {\n  limit = 1\n}\n", "agent.hcl:2:3: Unsupported argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfigFragment("agent.hcl", []byte(tc.src))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A real agent hands a third-party plugin its config block (HCL or JSON)
// and the plugin honours it (it serves the job type the block names); a
// value the plugin refuses stops the agent's start with the field's
// file:line:col and leaves no plugin process behind; a reload delivers a
// changed block and keeps the old config when the new one is refused.
func TestAgentPluginConfig(t *testing.T) {
	for _, format := range []string{"hcl", "json"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			pluginDir := filepath.Join(dir, "plugins")
			if err := os.Mkdir(pluginDir, 0o700); err != nil {
				t.Fatal(err)
			}
			installTestPlugin(t, pluginDir, "cfg", "test-config-sched")
			path := filepath.Join(dir, "agent."+format)

			// Refused at start.
			src, _, sizeAt := configFile(format, pluginDir, "custom", 500)
			writeFile(t, path, []byte(src), 0o600)
			cfg, err := LoadConfig(true, path)
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(cfg, Options{Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], PluginEnv: []string{testPluginEnv + "=1"}})
			if err == nil {
				a.Shutdown()
				t.Fatal("the agent started with a config its plugin refuses")
			}
			want := fmt.Sprintf(`%s:%s: plugin "cfg": config pool["main"].size: must be at most 100`, path, sizeAt)
			if !strings.Contains(err.Error(), want) {
				t.Errorf("start error = %v\nwant it to contain %q", err, want)
			}
			waitFor(t, "no child processes", func() (bool, string) {
				kids := childProcesses(t)
				return len(kids) == 0, strings.Join(kids, ", ")
			})

			// Honoured at start.
			src, jobTypeAt, _ := configFile(format, pluginDir, "custom", 5)
			writeFile(t, path, []byte(src), 0o600)
			cfg, err = LoadConfig(true, path)
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = filepath.Join(dir, "data")
			cfg.Ports.RPC = freePort(t)
			a = startTestAgent(t, cfg, hclog.Warn)
			a.configPaths = []string{path} // as `drover agent -config <path>` sets them
			served := func(jobType string) bool {
				info, ok := a.Plugins().Schedulers().JobType(jobType)
				return ok && info.Plugin == "cfg"
			}
			if !served("custom") {
				t.Fatalf("job type custom is not served by cfg: %v", a.Plugins().Schedulers().ServedTypes())
			}

			// A changed block reaches the plugin on reload.
			src, _, _ = configFile(format, pluginDir, "renamed", 5)
			writeFile(t, path, []byte(src), 0o600)
			if err := a.ReloadPlugins(t.Context()); err != nil {
				t.Fatalf("reload: %v", err)
			}
			if !served("renamed") || served("custom") {
				t.Fatalf("after the reload cfg serves %v, want renamed", a.Plugins().Schedulers().ServedTypes())
			}

			// A refused one is reported at its position, of kind invalid,
			// and the config in force stays.
			pid := pluginPids(a)["cfg"]
			src, _, _ = configFile(format, pluginDir, "", 5)
			writeFile(t, path, []byte(src), 0o600)
			err = a.ReloadPlugins(t.Context())
			want = fmt.Sprintf(`%s:%s: plugin "cfg": config job_type: must not be empty`, path, jobTypeAt)
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, structs.ErrInvalid) || !errors.Is(err, pluginhost.ErrConfigRefused) {
				t.Fatalf("reload with a refused config: %v\nwant ErrInvalid containing %q", err, want)
			}
			if !served("renamed") || pluginPids(a)["cfg"] != pid {
				t.Errorf("a refused config replaced the running plugin: serves %v, pid %d → %d",
					a.Plugins().Schedulers().ServedTypes(), pid, pluginPids(a)["cfg"])
			}
			if st, _ := a.Plugins().PluginStatus("cfg"); !strings.Contains(st.LastError, "must not be empty") ||
				st.Health != structs.AgentPluginHealthy {
				t.Errorf("status after the refused reload = %+v", st)
			}
		})
	}
}

// The built-in plugins take their config blocks on a real agent and honour
// them: the batch scheduler declares the max_attempts it was given, and
// the gc plugin keeps a failed allocation it reaps by default. A value a
// built-in refuses stops the agent's start with the field's file:line:col,
// leaving no plugin process behind.
func TestAgentBuiltinPluginConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.hcl")
	writeFile(t, path, []byte(`plugin "scheduler-batch" {
  config {
    max_attempts = 50
  }
}
`), 0o600)
	cfg, err := LoadConfig(true, path)
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(cfg, Options{Logger: hclog.NewNullLogger(), SelfExe: os.Args[0], PluginEnv: []string{testPluginEnv + "=1"}})
	if err == nil {
		a.Shutdown()
		t.Fatal("the agent started with max_attempts = 50")
	}
	want := path + `:3:20: plugin "scheduler-batch": config max_attempts: must be between 1 and 10, not 50`
	if !strings.Contains(err.Error(), want) || !errors.Is(err, pluginhost.ErrConfigRefused) {
		t.Errorf("start error = %v\nwant ErrConfigRefused containing %q", err, want)
	}
	waitFor(t, "no child processes", func() (bool, string) {
		kids := childProcesses(t)
		return len(kids) == 0, strings.Join(kids, ", ")
	})

	req, err := golden.Load("../../plugins/gc/testdata/eval_alloc_rules.json")
	if err != nil {
		t.Fatal(err)
	}
	decideFailed := func(a *Agent) string {
		t.Helper()
		col, err := GCRouter(a.Plugins()).Collector(req.GetCollection())
		if err != nil {
			t.Fatal(err)
		}
		resp, err := col.Decide(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range resp.GetDecisions() {
			if d.GetKind() == gcpb.ObjectKind_OBJECT_KIND_ALLOC && d.GetId() == "failed-no-policy" {
				return d.GetAction().String() + ": " + d.GetReason()
			}
		}
		t.Fatal("no decision on alloc failed-no-policy")
		return ""
	}

	writeFile(t, path, []byte(`plugin "scheduler-batch" {
  config {
    max_attempts = 7
  }
}
plugin "gc" {
  config {
    keep_failed_allocs = true
  }
}
`), 0o600)
	if cfg, err = LoadConfig(true, path); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Ports.RPC = freePort(t)
	a = startTestAgent(t, cfg, hclog.Warn)
	if info, ok := a.Plugins().Schedulers().JobType("batch"); !ok || info.MaxAttempts != 7 {
		t.Errorf("batch job type = %+v, %v; want max_attempts 7 from the config block", info, ok)
	}
	if got, want := decideFailed(a), "ACTION_KEEP: failed, kept by keep_failed_allocs"; got != want {
		t.Errorf("gc decision on a failed alloc = %q, want %q", got, want)
	}
}

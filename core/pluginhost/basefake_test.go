package pluginhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"google.golang.org/grpc"

	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// Base modes of the fake (baseEnv).
const (
	baseConfig    = "config"     // fakeSpec; refuses limit < 1 and pool sizes > 100
	baseNoConfig  = "noconfig"   // serves Base with no schema
	baseBadSchema = "bad-schema" // publishes a schema the host cannot use
	baseHang      = "hang"       // SetConfig never answers
	baseRequired  = "required"   // requires attribute token
)

// serveFake serves impl as a scheduler plugin and, unless baseMode is
// empty, the base protocol beside it, as an SDK plugin does.
func serveFake(impl scheduler.Scheduler, baseMode string) {
	if dir := os.Getenv(dirEnv); dir != "" {
		// Tests that must see the process gone find its pid here.
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("started-%d", os.Getpid())), nil, 0o600)
	}
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig: shared.Handshake,
		Plugins:         plugin.PluginSet{shared.KindScheduler: &scheduler.Plugin{Impl: impl}},
		GRPCServer: func(opts []grpc.ServerOption) *grpc.Server {
			s := grpc.NewServer(append(opts, shared.ServerOptions()...)...)
			if baseMode != "" {
				basepb.RegisterBaseServer(s, &fakeBase{mode: baseMode})
			}
			return s
		},
		Logger: scheduler.NewLogger(shared.KindScheduler),
	})
}

// fakeSpec is the config schema of the fake in mode baseConfig:
//
//	greeting = "hello"        # string, becomes the plugin's version
//	limit    = 1              # number, at least 1
//	pool "name" { size = 5 }  # size required, at most 100
var fakeSpec = &basepb.Spec{
	Attributes: []*basepb.Attribute{
		{Name: "greeting", Type: "string", DefaultJson: `"hello"`},
		{Name: "limit", Type: "number", DefaultJson: `1`},
	},
	Blocks: []*basepb.Block{{
		Name: "pool", Nesting: basepb.Block_NESTING_MAP,
		Body: &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "size", Type: "number", Required: true}}},
	}},
}

type fakeConfig struct {
	Greeting string                        `json:"greeting"`
	Limit    float64                       `json:"limit"`
	Pool     map[string]struct{ Size int } `json:"pool"`
}

// configured is the config in force in this fake process.
var configured fakeState

type fakeState struct {
	mu  sync.Mutex
	raw string // "" until SetConfig accepted one
	cfg fakeConfig
}

func (s *fakeState) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.raw
}

func (s *fakeState) version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Greeting
}

type fakeBase struct {
	basepb.UnimplementedBaseServer
	mode string
}

func (b *fakeBase) ConfigSchema(context.Context, *basepb.ConfigSchemaRequest) (*basepb.ConfigSchemaResponse, error) {
	switch b.mode {
	case baseNoConfig:
		return &basepb.ConfigSchemaResponse{}, nil
	case baseRequired:
		return &basepb.ConfigSchemaResponse{Spec: &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "token", Type: "string", Required: true}}}}, nil
	case baseBadSchema:
		return &basepb.ConfigSchemaResponse{Spec: &basepb.Spec{Attributes: []*basepb.Attribute{{Name: "x", Type: "strang"}}}}, nil
	}
	return &basepb.ConfigSchemaResponse{Spec: fakeSpec}, nil
}

func (b *fakeBase) SetConfig(ctx context.Context, req *basepb.SetConfigRequest) (*basepb.SetConfigResponse, error) {
	if b.mode == baseHang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var cfg fakeConfig
	if err := json.Unmarshal(req.GetConfigJson(), &cfg); err != nil {
		return nil, err
	}
	var fes []*basepb.FieldError
	if b.mode == baseConfig && cfg.Limit < 1 {
		fes = append(fes, &basepb.FieldError{Path: "limit", Message: "must be at least 1"})
	}
	for name, p := range cfg.Pool {
		if p.Size > 100 {
			fes = append(fes, &basepb.FieldError{Path: fmt.Sprintf("pool[%q].size", name), Message: "must be at most 100"})
		}
	}
	if len(fes) > 0 {
		return &basepb.SetConfigResponse{FieldErrors: fes}, nil
	}
	configured.mu.Lock()
	configured.raw, configured.cfg = req.GetPluginName()+" "+string(req.GetConfigJson()), cfg
	configured.mu.Unlock()
	return &basepb.SetConfigResponse{}, nil
}

// configBlock parses src, a `config { ... }` block as written in file
// agent.hcl, and returns the block's body, as the agent hands it over.
func configBlock(t *testing.T, src string) hcl.Body {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "agent.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parse %q: %v", src, diags)
	}
	content, diags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "config"}}})
	if diags.HasErrors() || len(content.Blocks) != 1 {
		t.Fatalf("parse %q: want one config block: %v", src, diags)
	}
	return content.Blocks[0].Body
}

// configOf asks plugin name for the config in force in its process: its
// name as SetConfig gave it and the JSON it accepted.
func configOf(t *testing.T, h *Host, name string) string {
	t.Helper()
	var got string
	err := Get(h, SchedulerKind).Call(t.Context(), name, func(ctx context.Context, s scheduler.Scheduler) error {
		resp, err := s.Schedule(ctx, evalReq(evalConfig))
		got = strings.TrimPrefix(resp.GetStatusDescription(), "config ")
		return err
	})
	if err != nil {
		t.Fatalf("ask %s for its config: %v", name, err)
	}
	return got
}

// startedPids are the pids of the fakes started with dir as their dirEnv.
func startedPids(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		if rest, ok := strings.CutPrefix(e.Name(), "started-"); ok {
			pid, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

package pluginhost

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// baseFake is a built-in fake scheduler of mode "a" serving the base
// protocol in baseMode ("": not at all).
func baseFake(name, baseMode string, env ...string) Builtin {
	if baseMode != "" {
		env = append(env, baseEnv+"="+baseMode)
	}
	return fake(name, "a", env...)
}

// A plugin gets its config block, decoded against its schema, before any
// call of its kind (its Info already reflects it), and gets it again when
// it is restarted after a crash; a built-in and a plugin_dir binary alike.
func TestConfigDeliveredAtStartAndAfterRestart(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "ext", "b", baseEnv+"="+baseConfig)
	cfg := testConfig(t, baseFake("sched-a", baseConfig))
	cfg.PluginDir = dir
	cfg.Stanzas = []Stanza{
		{Name: "sched-a", Config: configBlock(t, "config {\n  greeting = \"hi\"\n  pool \"x\" {\n    size = 5\n  }\n}\n")},
		{Name: "ext", Config: configBlock(t, "config {\n  limit = 7\n}\n")},
	}
	h := newHost(t, cfg)
	want := map[string]string{
		"sched-a": `sched-a {"greeting":"hi","limit":1,"pool":{"x":{"size":5}}}`,
		"ext":     `ext {"greeting":"hello","limit":7,"pool":{}}`,
	}
	for name, w := range want {
		if got := configOf(t, h, name); got != w {
			t.Errorf("%s has config %s, want %s", name, got, w)
		}
	}
	if v := statusOf(t, h, "sched-a").Version; v != "hi" {
		t.Errorf("sched-a's Info gave version %q, want %q: Info ran before SetConfig", v, "hi")
	}

	for name, w := range want {
		pid := statusOf(t, h, name).Pid
		err := Get(h, SchedulerKind).Call(t.Context(), name, func(ctx context.Context, s scheduler.Scheduler) error {
			_, err := s.Schedule(ctx, evalReq(evalCrash))
			return err
		})
		if !errors.Is(err, ErrPluginUnavailable) {
			t.Fatalf("crash %s: %v", name, err)
		}
		if err := waitFor(func() bool { st := statusOf(t, h, name); return st.Running && st.Pid != pid }); err != nil {
			t.Fatalf("%s never restarted: %+v", name, statusOf(t, h, name))
		}
		if got := configOf(t, h, name); got != w {
			t.Errorf("%s after its restart has config %s, want %s", name, got, w)
		}
	}
}

// No config block: the plugin gets its schema's defaults; one that serves
// no Base service, or publishes no schema, gets along without a config.
func TestNoConfigBlockGetsDefaults(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "unnamed", "b", baseEnv+"="+baseConfig)
	cfg := testConfig(t, baseFake("sched-a", baseConfig), baseFake("plain", ""), baseFake("noconf", baseNoConfig))
	cfg.PluginDir = dir
	cfg.Stanzas = []Stanza{{Name: "plain"}, {Name: "noconf", Config: configBlock(t, "config {}\n")}}
	h := newHost(t, cfg)
	for name, want := range map[string]string{
		"sched-a": `sched-a {"greeting":"hello","limit":1,"pool":{}}`,
		"unnamed": `unnamed {"greeting":"hello","limit":1,"pool":{}}`,
		"plain":   "", // never got a SetConfig
		"noconf":  `noconf {}`,
	} {
		if got := configOf(t, h, name); got != want {
			t.Errorf("%s has config %q, want %q", name, got, want)
		}
	}
}

// A config the agent or the plugin refuses fails New: the error names the
// file:line:col of the field, the plugin and the field, and no plugin
// process is left behind.
func TestConfigRefusedAtStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		base    string
		block   string // "": no config block
		want    string
		refused bool // a config refusal (ErrConfigRefused), not a broken plugin
	}{
		{"plugin refuses a field", baseConfig, "config {\n  limit = 0\n}\n",
			`agent.hcl:2:11: plugin "sched": config limit: must be at least 1`, true},
		{"plugin refuses a nested field", baseConfig, "config {\n  pool \"big\" {\n    size = 500\n  }\n}\n",
			`agent.hcl:3:12: plugin "sched": config pool["big"].size: must be at most 100`, true},
		{"unknown field", baseConfig, "config {\n  colour = \"red\"\n}\n",
			`agent.hcl:2:3: plugin "sched": config: Unsupported argument; An argument named "colour" is not expected here.`, true},
		{"wrong type", baseConfig, "config {\n  limit = \"many\"\n}\n",
			`agent.hcl:2:11: plugin "sched": config: Incorrect attribute value type`, true},
		{"missing required field in a block", baseConfig, "config {\n  pool \"x\" {}\n}\n",
			`agent.hcl:2:12: plugin "sched": config: Missing required argument; The argument "size" is required`, true},
		{"missing required field without a block", baseRequired, "",
			`plugin "sched": config: Missing required argument; The argument "token" is required`, true},
		{"no Base service", "", "config {\n  limit = 2\n}\n",
			`agent.hcl:2:3: plugin "sched" takes no configuration; remove its config block`, true},
		{"no schema", baseNoConfig, "config {\n  x {}\n}\n",
			`agent.hcl:2:3: plugin "sched" takes no configuration; remove its config block`, true},
		{"unusable schema", baseBadSchema, "",
			`base: the plugin publishes a config schema the agent cannot use: attribute x: type "strang"`, false},
		{"SetConfig hangs", baseHang, "", `base: SetConfig: rpc error: code = DeadlineExceeded`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.base == baseHang {
				testtier.Slow(t, "waits out the 5 s deadline of a SetConfig that hangs")
			}
			dir := t.TempDir()
			cfg := testConfig(t, baseFake("ok", baseConfig), baseFake("sched", tc.base, dirEnv+"="+dir))
			if tc.block != "" {
				cfg.Stanzas = []Stanza{{Name: "sched", Config: configBlock(t, tc.block)}}
			}
			// Bounds the hanging SetConfig; far above a handshake.
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			h, err := New(ctx, cfg)
			if err == nil {
				_ = h.Close()
				t.Fatal("New succeeded, want the config refused")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %q\nwant it to contain %q", err, tc.want)
			}
			if refused := errors.Is(err, ErrConfigRefused); refused != tc.refused || refused && !errors.Is(err, structs.ErrInvalid) {
				t.Errorf("errors.Is(ErrConfigRefused) = %v, want %v (and of kind ErrInvalid)", refused, tc.refused)
			}
			if tc.refused && strings.Contains(err.Error(), "launch plugin") {
				t.Errorf("a refused config is reported as a broken launch: %q", err)
			}
			pids := startedPids(t, dir)
			if len(pids) == 0 {
				t.Fatal("the plugin never started")
			}
			for _, pid := range pids {
				if err := waitFor(func() bool { return !alive(pid) }); err != nil {
					t.Errorf("plugin process %d outlives the failed New", pid)
				}
			}
			goleak.VerifyNone(t)
		})
	}
}

// A plugin_dir file no stanza names that refuses its defaults is a drover
// plugin wanting a config: that fails New, where a file that is no plugin
// is skipped.
func TestUnnamedFileRefusingDefaultsFailsNew(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "needs-token", "a", baseEnv+"="+baseRequired)
	cfg := testConfig(t)
	cfg.PluginDir = dir
	h, err := New(t.Context(), cfg)
	if err == nil {
		_ = h.Close()
		t.Fatal("New succeeded; want the plugin's missing token to fail it")
	}
	if want := `plugin "needs-token": config: Missing required argument`; !strings.Contains(err.Error(), want) || !errors.Is(err, ErrConfigRefused) {
		t.Errorf("error = %v, want ErrConfigRefused with %q", err, want)
	}
}

// A reload hands a changed config block to a new instance; an unchanged
// one (parsed again) spares the plugin; a refused one keeps the running
// instance and its config, for reloads and restarts to come, and the
// reload returns the error at the field's position.
func TestConfigReload(t *testing.T) {
	dir := t.TempDir()
	installFake(t, dir, "ext", "b", baseEnv+"="+baseConfig)
	cfg := testConfig(t, baseFake("sched-a", baseConfig))
	cfg.PluginDir = dir
	stanzas := func(ext string) []Stanza {
		return []Stanza{{Name: "ext", Config: configBlock(t, ext)}}
	}
	cfg.Stanzas = stanzas("config {\n  limit = 2\n}\n")
	h := newHost(t, cfg)

	for _, tc := range []struct {
		name     string
		block    string
		reloaded []string
		wantErr  string
		config   string // ext's config in force afterwards
	}{
		{name: "same block parsed again", block: "config {\n  limit = 2\n}\n",
			config: `ext {"greeting":"hello","limit":2,"pool":{}}`},
		{name: "same value written otherwise", block: "config {\n  limit   = 1 + 1\n  greeting = \"hello\"\n}\n",
			config: `ext {"greeting":"hello","limit":2,"pool":{}}`},
		{name: "changed", block: "config {\n  limit = 3\n}\n", reloaded: []string{"ext"},
			config: `ext {"greeting":"hello","limit":3,"pool":{}}`},
		{name: "refused by the plugin", block: "config {\n  limit = 0\n}\n", reloaded: []string{"ext"},
			wantErr: `agent.hcl:2:11: plugin "ext": config limit: must be at least 1`,
			config:  `ext {"greeting":"hello","limit":3,"pool":{}}`},
		{name: "refused by the schema", block: "config {\n  limit = 3\n  nope = 1\n}\n", reloaded: []string{"ext"},
			wantErr: `agent.hcl:3:3: plugin "ext": config: Unsupported argument`,
			config:  `ext {"greeting":"hello","limit":3,"pool":{}}`},
		{name: "the config in force again", block: "config {\n  limit = 3\n}\n",
			config: `ext {"greeting":"hello","limit":3,"pool":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := statusOf(t, h, "ext").Pid
			got, err := h.ReloadChanged(t.Context(), stanzas(tc.block))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrConfigRefused)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !slices.Equal(got.Reloaded, tc.reloaded) {
				t.Errorf("reloaded %v, want %v", got, tc.reloaded)
			}
			if newPid := statusOf(t, h, "ext").Pid; (newPid != pid) != (tc.reloaded != nil && tc.wantErr == "") {
				t.Errorf("ext's pid %d → %d", pid, newPid)
			}
			if c := configOf(t, h, "ext"); c != tc.config {
				t.Errorf("ext's config = %s, want %s", c, tc.config)
			}
		})
	}

	// A refused config was never adopted: a restart after a crash gets
	// the one in force.
	pid := statusOf(t, h, "ext").Pid
	if _, err := h.ReloadChanged(t.Context(), stanzas("config {\n  limit = 0\n}\n")); !errors.Is(err, ErrConfigRefused) {
		t.Fatalf("refused reload: %v", err)
	}
	_ = Get(h, SchedulerKind).Call(t.Context(), "ext", func(ctx context.Context, s scheduler.Scheduler) error {
		_, err := s.Schedule(ctx, evalReq(evalCrash))
		return err
	})
	if err := waitFor(func() bool { st := statusOf(t, h, "ext"); return st.Running && st.Pid != pid }); err != nil {
		t.Fatalf("ext never restarted: %+v", statusOf(t, h, "ext"))
	}
	if c, want := configOf(t, h, "ext"), `ext {"greeting":"hello","limit":3,"pool":{}}`; c != want {
		t.Errorf("after a crash ext has config %s, want the one in force %s", c, want)
	}
}

// The host reports a refused field at the deepest part of its path the
// config block has, or at the block for a field left at its default.
func TestFieldErrorPositions(t *testing.T) {
	body := configBlock(t, "config {\n  pool \"a\" {\n    size = 500\n  }\n}\n")
	for _, tc := range []struct {
		path, want string
	}{
		{`pool["a"].size`, `agent.hcl:3:12: plugin "p": config pool["a"].size: bad`},
		{`pool["b"].size`, `agent.hcl:1:8: plugin "p": config pool["b"].size: bad`},
		{`limit`, `agent.hcl:1:8: plugin "p": config limit: bad`},
		{``, `agent.hcl:1:8: plugin "p": config: bad`},
	} {
		err := fieldErrors("p", fakeSpec, body, []*basepb.FieldError{{Path: tc.path, Message: "bad"}})
		if err.Error() != tc.want {
			t.Errorf("path %q: %q, want %q", tc.path, err, tc.want)
		}
	}
	// A plugin cannot flood the agent's errors.
	var fes []*basepb.FieldError
	for range 100 {
		fes = append(fes, &basepb.FieldError{Path: "limit", Message: strings.Repeat("x", 10000)})
	}
	err := fieldErrors("p", fakeSpec, nil, fes)
	if n := len(err.(*ConfigError).Problems); n != maxConfigProblems+1 || len(err.Error()) > 30*(maxProblemBytes+64) {
		t.Errorf("100 long field errors gave %d lines, %d bytes", n, len(err.Error()))
	}
}

package agent

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/server"
)

func TestGCConfig(t *testing.T) {
	src := `data_dir = "/x"
server {
  enabled                       = true
  eval_gc_threshold             = "2h"
  batch_eval_gc_threshold       = "48h"
  job_gc_threshold              = "8h"
  node_gc_threshold             = "12h"
  deployment_gc_threshold       = "30m"
  csi_volume_claim_gc_threshold = "10m"
  csi_plugin_gc_threshold       = "90m"
  acl_token_gc_threshold        = "0s"
  job_gc_interval               = "1m"
  csi_volume_claim_gc_interval  = "24h"
}
`
	c, err := ParseConfig("agent.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := server.GCConfig{
		EvalGCThreshold: 2 * time.Hour, BatchEvalGCThreshold: 48 * time.Hour, JobGCThreshold: 8 * time.Hour,
		NodeGCThreshold: 12 * time.Hour, DeploymentGCThreshold: 30 * time.Minute, CSIVolumeClaimGCThreshold: 10 * time.Minute,
		CSIPluginGCThreshold: 90 * time.Minute,
		ACLTokenGCThreshold:  time.Nanosecond, // zero: collect at once, not the default
		JobGCInterval:        time.Minute, CSIVolumeClaimGCInterval: 24 * time.Hour,
	}
	if got := c.Server.gcConfig(); got != want {
		t.Errorf("gcConfig =\n%+v, want\n%+v", got, want)
	}

	// Unset keys keep Nomad's defaults.
	c, err = ParseConfig("agent.hcl", []byte("data_dir = \"/x\"\nserver {\n  enabled = true\n  job_gc_threshold = \"1h\"\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want = server.DefaultGCConfig()
	want.JobGCThreshold = time.Hour
	if got := c.Server.gcConfig(); got != want {
		t.Errorf("gcConfig with one key =\n%+v, want\n%+v", got, want)
	}
}

func TestGCConfigErrors(t *testing.T) {
	for _, tc := range []struct{ setting, want string }{
		{`eval_gc_threshold = "soon"`, `agent.hcl:4:22: server.eval_gc_threshold: "soon" is not a duration`},
		{`eval_gc_threshold = "5"`, `agent.hcl:4:22: server.eval_gc_threshold: "5" is not a duration`},
		{`batch_eval_gc_threshold = "-1h"`, `agent.hcl:4:28: server.batch_eval_gc_threshold: must not be negative, got "-1h"`},
		{`job_gc_threshold = "-1s"`, "server.job_gc_threshold: must not be negative"},
		{`node_gc_threshold = "-1ns"`, "server.node_gc_threshold: must not be negative"},
		{`deployment_gc_threshold = "x"`, "server.deployment_gc_threshold: \"x\" is not a duration"},
		{`csi_volume_claim_gc_threshold = "-5m"`, "server.csi_volume_claim_gc_threshold: must not be negative"},
		{`csi_plugin_gc_threshold = "-5m"`, "server.csi_plugin_gc_threshold: must not be negative"},
		{`acl_token_gc_threshold = "1 hour"`, "server.acl_token_gc_threshold: \"1 hour\" is not a duration"},
		{`job_gc_interval = "0s"`, `agent.hcl:4:20: server.job_gc_interval: must be at least 1s, got "0s"`},
		{`job_gc_interval = "999ms"`, "server.job_gc_interval: must be at least 1s"},
		{`job_gc_interval = "-1m"`, "server.job_gc_interval: must be at least 1s"},
		{`csi_volume_claim_gc_interval = "25h"`, `agent.hcl:4:33: server.csi_volume_claim_gc_interval: must be at most 24h0m0s, got "25h"`},
		{`job_gc_threshold = "87601h"`, `server.job_gc_threshold: must be at most 87600h0m0s, got "87601h"`},
		{`csi_volume_claim_gc_interval = "never"`, "server.csi_volume_claim_gc_interval: \"never\" is not a duration"},
		{`job_gc_interval = 5`, "agent.hcl:4:"}, // not a string: HCL says so at the value
	} {
		t.Run(tc.setting, func(t *testing.T) {
			_, err := ParseConfig("agent.hcl", []byte("data_dir = \"/x\"\nserver {\n enabled = true\n "+tc.setting+"\n}\n"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{`job_gc_interval = "1s"`, `job_gc_interval = "24h"`, `eval_gc_threshold = "0"`, `node_gc_threshold = "87600h"`} {
		if _, err := ParseConfig("agent.hcl", []byte("data_dir = \"/x\"\nserver {\n enabled = true\n "+ok+"\n}\n")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A -config directory: a bad value names its own file and position, and
// a later file's value overrides an earlier one.
func TestGCConfigAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "10-base.hcl"), []byte("data_dir = \"/x\"\nserver {\n  enabled = true\n  job_gc_threshold = \"1h\"\n}\n"), 0o600)
	writeFile(t, filepath.Join(dir, "20-gc.hcl"), []byte("server {\n  job_gc_threshold = \"2h\"\n}\n"), 0o600)
	c, err := LoadConfig(false, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.Server.gcConfig().JobGCThreshold; got != 2*time.Hour {
		t.Errorf("job_gc_threshold = %s, want the later file's 2h", got)
	}
	bad := filepath.Join(dir, "30-bad.hcl")
	writeFile(t, bad, []byte("server {\n  job_gc_interval = \"100ms\"\n}\n"), 0o600)
	c2, err := LoadConfig(false, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Validate(); err == nil || !strings.Contains(err.Error(), bad+":2:21: server.job_gc_interval: must be at least 1s") {
		t.Errorf("Validate with a bad file: %v", err)
	}
	// A config built in code is held to the same rules by Validate.
	c.Server.NodeGCThreshold = "-1h"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "server.node_gc_threshold: must not be negative") {
		t.Errorf("Validate: %v", err)
	}
}

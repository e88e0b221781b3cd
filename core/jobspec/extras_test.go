package jobspec

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// wrapGroup puts groupBody inside a job with one group holding one
// raw_exec task after it; line 3 is groupBody's first line.
func wrapGroup(groupBody string) string {
	return "job \"j\" {\n  group \"g\" {\n" + groupBody +
		"    task \"t\" {\n      driver = \"raw_exec\"\n      config {\n        command = \"/bin/true\"\n      }\n    }\n  }\n}\n"
}

// A scaling block and a group's count settle each other as in Nomad: an
// absent count is min, an absent min is the count.
func TestScalingCountAndMin(t *testing.T) {
	tests := []struct {
		name           string
		group          string
		count          int
		min, max       int64
		enabled        bool
		wantPolicyKeys []string
	}{
		{"count from min", "    scaling {\n      min = 3\n      max = 9\n    }\n", 3, 3, 9, true, nil},
		{"min from count", "    count = 4\n    scaling {\n      max = 9\n    }\n", 4, 4, 9, true, nil},
		{"min from the default count", "    scaling {\n      max = 2\n    }\n", 1, 1, 2, true, nil},
		{"both set", "    count = 5\n    scaling {\n      min = 2\n      max = 5\n      enabled = false\n    }\n", 5, 2, 5, false, nil},
		{"policy kept", "    scaling {\n      max = 3\n      policy {\n        cooldown = \"1m\"\n        check \"c\" {\n          source = \"prometheus\"\n        }\n      }\n    }\n", 1, 1, 3, true, []string{"check", "cooldown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := ParseAndValidate("job.hcl", []byte(wrapGroup(tt.group)))
			if err != nil {
				t.Fatal(err)
			}
			tg := job.TaskGroups[0]
			s := tg.Scaling
			if tg.Count != tt.count || s.Min != tt.min || s.Max != tt.max || s.Enabled != tt.enabled || s.Type != "horizontal" {
				t.Errorf("count %d, policy %+v; want count %d, min %d, max %d, enabled %v, horizontal", tg.Count, s, tt.count, tt.min, tt.max, tt.enabled)
			}
			if s.Target["Job"] != "j" || s.Target["Group"] != "g" || s.Target["Namespace"] != "default" || s.ID != structs.ScalingPolicyID("default", "j", "g") {
				t.Errorf("target %v id %q", s.Target, s.ID)
			}
			for _, k := range tt.wantPolicyKeys {
				if _, ok := s.Policy[k]; !ok {
					t.Errorf("policy %v lacks %q", s.Policy, k)
				}
			}
		})
	}
}

// A scaling policy keeps the autoscaler's blocks in Nomad's shape: each
// block type a list, a labelled block a one-entry map per label.
func TestScalingPolicyShape(t *testing.T) {
	src := wrapGroup(`    scaling {
      max = 3
      policy {
        cooldown = "1m"
        check "avg_cpu" {
          source = "nomad-apm"
          strategy "target-value" {
            target = 70
          }
        }
        check "mem" {
          source = "nomad-apm"
        }
      }
    }
`)
	job, err := Parse("job.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p := job.TaskGroups[0].Scaling.Policy
	checks, ok := p["check"].([]any)
	if !ok || len(checks) != 2 {
		t.Fatalf("check = %#v, want a list of two", p["check"])
	}
	cpu := checks[0].(map[string]any)["avg_cpu"].([]any)[0].(map[string]any)
	strategy := cpu["strategy"].([]any)[0].(map[string]any)["target-value"].([]any)[0].(map[string]any)
	if cpu["source"] != "nomad-apm" || strategy["target"] != 70 || p["cooldown"] != "1m" {
		t.Errorf("policy = %#v", p)
	}
	if _, ok := checks[1].(map[string]any)["mem"]; !ok {
		t.Errorf("second check = %#v", checks[1])
	}
}

// The data-only blocks are kept as Nomad names them.
func TestKeptBlocks(t *testing.T) {
	job, err := ParseAndValidate("blocks.hcl", mustRead(t, "testdata/blocks.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if job.UI == nil || job.UI.Description != "The **web** front end" || len(job.UI.Links) != 2 || job.UI.Links[1].URL != "https://example.com/d" {
		t.Errorf("ui = %+v", job.UI)
	}
	tg := job.TaskGroups[0]
	if tg.ReschedulePolicy == nil || tg.ReschedulePolicy.Attempts != 5 {
		t.Errorf("job-level reschedule not laid over the group: %+v", tg.ReschedulePolicy)
	}
	if d := tg.Disconnect; d == nil || d.Reconcile != "keep_original" || d.Replace == nil || !*d.Replace || d.LostAfter != 0 {
		t.Errorf("disconnect = %+v, want reconcile keep_original, replace true", d)
	}
	task := tg.Tasks[0]
	if task.Kind != "worker" || task.ShutdownDelay != 5*time.Second {
		t.Errorf("kind %q shutdown_delay %v", task.Kind, task.ShutdownDelay)
	}
	if len(task.Actions) != 1 || task.Actions[0].Name != "echo-env" || task.Actions[0].Command != "/bin/sh" || strings.Join(task.Actions[0].Args, " ") != "-c env" {
		t.Errorf("actions = %+v", task.Actions)
	}
	if r := task.Resources; r.SecretsMB != 2 || r.NUMA == nil || r.NUMA.Affinity != "none" {
		t.Errorf("resources = %+v", r)
	}
}

// A group's reschedule block is laid over the job's, which is laid over
// the type's default.
func TestRescheduleInheritance(t *testing.T) {
	src := `job "j" {
  type = "batch"
  reschedule {
    attempts = 4
    delay    = "10s"
  }
  group "a" {
    reschedule {
      delay = "20s"
    }
    task "t" {
      driver = "raw_exec"
    }
  }
  group "b" {
    task "t" {
      driver = "raw_exec"
    }
  }
}
`
	job, err := ParseWith("job.hcl", []byte(src), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	a, b := job.TaskGroups[0].ReschedulePolicy, job.TaskGroups[1].ReschedulePolicy
	if a.Attempts != 4 || a.Delay != 20*time.Second || b.Attempts != 4 || b.Delay != 10*time.Second {
		t.Errorf("group a %+v, group b %+v", a, b)
	}
	if a.Interval != 24*time.Hour || b.Interval != 24*time.Hour {
		t.Errorf("the type's interval was lost: a %v, b %v", a.Interval, b.Interval)
	}

	// A type that refuses reschedule blocks refuses the job's too, in
	// every group it would reach.
	sys := strings.Replace(src, `type = "batch"`, `type = "sysbatch"`, 1)
	_, err = Check("job.hcl", []byte(sys), testOptions)
	if err == nil || strings.Count(err.Error(), "reschedule") != 2 {
		t.Errorf("a sysbatch job with a job-level reschedule block: %v, want each group refused", err)
	}
}

// What drover cannot honour parses, as it does in Nomad, and is refused
// by validation (`job validate`, registration) at its position with why;
// what is not valid for Nomad either is refused by the parser. The zero
// values of the disconnect attributes are accepted.
func TestUnsupportedBlocksRefused(t *testing.T) {
	tests := []struct {
		name, src, want, detail string
		// parses: the file parses (the refusal is validation's).
		parses bool
	}{
		{"max_client_disconnect", wrapGroup("    max_client_disconnect = \"1h\"\n"), "job.hcl:3:5: Invalid job", `group "g": max_client_disconnect: not supported: drover marks`, true},
		{"stop_after_client_disconnect", wrapGroup("    stop_after_client_disconnect = \"1m\"\n"), "job.hcl:3:5: Invalid job", "stop_after_client_disconnect: not supported", true},
		{"prevent_reschedule_on_lost", wrapGroup("    prevent_reschedule_on_lost = true\n"), "job.hcl:3:5: Invalid job", "prevent_reschedule_on_lost: not supported", true},
		{"lost_after", wrapGroup("    disconnect {\n      lost_after = \"5m\"\n    }\n"), "job.hcl:3:5: Invalid job", "disconnect: lost_after: not supported", true},
		{"stop_on_client_after", wrapGroup("    disconnect {\n      stop_on_client_after = \"5m\"\n    }\n"), "job.hcl:3:5: Invalid job", "stop_on_client_after: not supported", true},
		{"replace false", wrapGroup("    disconnect {\n      replace = false\n    }\n"), "job.hcl:3:5: Invalid job", "replace: false is not supported", true},
		{"bad reconcile", wrapGroup("    disconnect {\n      reconcile = \"newest\"\n    }\n"), "job.hcl:4:19: Invalid reconcile option", `got "newest"`, false},
		{"lost_after with max_client_disconnect", wrapGroup("    disconnect {\n      lost_after = \"0s\"\n    }\n    max_client_disconnect = \"1h\"\n"), "job.hcl:4:7: Conflicting attributes", "not both", false},
		{"scaling without max", wrapGroup("    scaling {\n      min = 1\n    }\n"), "job.hcl:3:5: Missing required argument", "needs max", false},
		{"scaling min above max", wrapGroup("    scaling {\n      min = 5\n      max = 2\n    }\n"), "job.hcl:4:13: Invalid scaling bounds", "min (5) must not be greater than max (2)", false},
		{"count above max", wrapGroup("    count = 7\n    scaling {\n      max = 3\n    }\n"), "job.hcl:3:13: Count outside scaling bounds", "must not be greater than the scaling block's max (3, at job.hcl:5:13)", false},
		{"count below min", wrapGroup("    count = 1\n    scaling {\n      min = 2\n      max = 3\n    }\n"), "job.hcl:3:13: Count outside scaling bounds", "less than the scaling block's min (2", false},
		{"default count above max", wrapGroup("    scaling {\n      max = 0\n    }\n"), "job.hcl:4:13: Count outside scaling bounds", "max (0) is below the group's count (1", false},
		{"scaling type", wrapGroup("    scaling {\n      max = 3\n      type = \"vertical_cpu\"\n    }\n"), "job.hcl:5:14: Invalid scaling type", "dynamic application sizing", false},
		{"device", wrapTask("      resources {\n        device \"nvidia/gpu\" {\n          count = 2\n        }\n      }\n"), "job.hcl:5:9: Invalid job", `device "nvidia/gpu": not supported: drover has no device plugins`, true},
		{"numa require", wrapTask("      resources {\n        numa {\n          affinity = \"require\"\n        }\n      }\n"), "job.hcl:5:9: Invalid job", "does not place tasks by NUMA topology", true},
		{"numa bad", wrapTask("      resources {\n        numa {\n          affinity = \"some\"\n        }\n      }\n"), "job.hcl:6:22: Invalid NUMA affinity", `got "some"`, false},
		{"secrets negative", wrapTask("      resources {\n        secrets = -1\n      }\n"), "job.hcl:5:19: Value out of range", `"secrets" must be between 0`, false},
		{"connect kind", wrapTask("      kind = \"connect-proxy:api\"\n"), "job.hcl:4:7: Invalid job", "Consul Connect task kind", true},
		{"action without command", wrapTask("      action \"a\" {\n        args = [\"x\"]\n      }\n"), "job.hcl:4:7: Missing required argument", "An action needs a command", false},
		{"duplicate action", wrapTask("      action \"a\" {\n        command = \"x\"\n      }\n      action \"a\" {\n        command = \"y\"\n      }\n"), "job.hcl:7:14: Duplicate action \"a\"", "already defined at job.hcl:4:7", false},
		{"task scaling", wrapTask("      scaling \"cpu\" {\n        max = 1000\n      }\n"), "job.hcl:4:7: Invalid job", `task "t": scaling "cpu": not supported: it sizes the task's resources with Nomad Enterprise's dynamic application sizing`, true},
		{"task scaling of another resource", wrapTask("      scaling \"disk\" {\n        max = 1000\n      }\n"), "job.hcl:4:15: Invalid scaling policy", `"cpu" or "mem", got "disk"`, false},
		{"task schedule", wrapTask("      schedule {\n      }\n"), "job.hcl:4:7: Unsupported block type", "Nomad Enterprise", false},
		{"task secret", wrapTask("      secret \"db\" {\n      }\n"), "job.hcl:4:7: Unsupported block type", "no secrets providers", false},
		{"artifact insecure", wrapTask("      artifact {\n        source = \"https://x/a.tgz\"\n        insecure = true\n      }\n"), "job.hcl:4:7: Invalid job", "artifact 1: insecure: not supported", true},
		{"artifact chown", wrapTask("      artifact {\n        source = \"https://x/a.tgz\"\n        chown = true\n      }\n"), "job.hcl:4:7: Invalid job", "artifact 1: chown: not supported", true},
		{"template change_script", wrapTask("      template {\n        data = \"x\"\n        destination = \"local/x\"\n        change_script {\n          command = \"/bin/reload\"\n        }\n      }\n"), "job.hcl:4:7: Invalid job", "template 1: change_script: not supported: drover runs no template change scripts", true},
		{"template once", wrapTask("      template {\n        data = \"x\"\n        destination = \"local/x\"\n        once = true\n      }\n"), "job.hcl:4:7: Invalid job", "template 1: once: not supported", true},
		{"network cni", wrapGroup("    network {\n      cni {\n        args = { a = \"b\" }\n      }\n    }\n"), "job.hcl:4:7: Unsupported block type", "cni is only allowed with mode", false},
		{"port ignore_collision", wrapGroup("    network {\n      port \"p\" {\n        static = 8080\n        ignore_collision = true\n      }\n    }\n"), "job.hcl:6:9: Unsupported argument", "ignore_collision = true is not supported", false},
		{"task-level network", wrapTask("      resources {\n        network {\n          mbits = 10\n        }\n      }\n"), "job.hcl:5:9: Unsupported block type", "write it in the group", false},
		{"check advertise", wrapGroup("    network {\n      port \"p\" {}\n    }\n    service {\n      provider = \"nomad\"\n      port = \"p\"\n      check {\n        type = \"tcp\"\n        interval = \"10s\"\n        timeout = \"1s\"\n        advertise = \"10.0.0.1\"\n      }\n    }\n"), "job.hcl:9:7: Invalid job", "advertise is not supported", true},
		{"vault_token", "job \"j\" {\n  vault_token = \"s.x\"\n}\n", "job.hcl:2:3: Invalid job", "vault_token: not supported: it is a token for Vault", true},
		{"consul_token", "job \"j\" {\n  consul_token = \"x\"\n}\n", "job.hcl:2:3: Invalid job", "consul_token: not supported: it is a token for Consul", true},
		{"logs enabled and disabled", wrapTask("      logs {\n        disabled = true\n        enabled = false\n      }\n"), "job.hcl:6:9: Conflicting attributes", "not both", false},
		{"ui description too long", "job \"j\" {\n  ui {\n    description = \"" + strings.Repeat("d", structs.MaxUIDescriptionBytes+1) + "\"\n  }\n}\n", "job.hcl:3:19: Value too long", "exceeds limit of 4096", false},
		{"ui link unknown attribute", "job \"j\" {\n  ui {\n    link {\n      href = \"x\"\n    }\n  }\n}\n", "job.hcl:4:7: Unsupported argument", `"href" is not expected here`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, perr := Parse("job.hcl", []byte(tt.src))
			if tt.parses && perr != nil {
				t.Fatalf("refused at parse time, want it parsed as Nomad parses it: %v", perr)
			}
			if !tt.parses && perr == nil {
				t.Fatal("parsed, want a refusal")
			}
			_, err := Check("job.hcl", []byte(tt.src), Options{})
			if err == nil {
				t.Fatal("checked, want a refusal")
			}
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				found = found || strings.HasPrefix(line, tt.want) && strings.Contains(line, tt.detail)
			}
			if !found {
				t.Errorf("no error line starts %q and contains %q:\n%s", tt.want, tt.detail, err)
			}
		})
	}

	// Too many links or actions are refused at the first one over.
	var links, actions strings.Builder
	for i := 0; i <= structs.MaxUILinks; i++ {
		links.WriteString("    link {\n      url = \"u\"\n    }\n")
	}
	for i := 0; i <= structs.MaxActionsPerTask; i++ {
		actions.WriteString("      action \"a" + strings.Repeat("x", i) + "\" {\n        command = \"c\"\n      }\n")
	}
	for _, src := range []string{
		"job \"j\" {\n  ui {\n" + links.String() + "  }\n}\n",
		wrapTask(actions.String()),
	} {
		if _, err := Parse("job.hcl", []byte(src)); err == nil || !strings.Contains(err.Error(), "at most 32") {
			t.Errorf("%d bytes of blocks over the limit: %v, want at most 32 named", len(src), err)
		}
	}

	// The deprecated logs attribute enabled is disabled's inverse.
	for src, want := range map[string]bool{"enabled = false": true, "enabled = true": false} {
		job, err := Parse("job.hcl", []byte(wrapTask("      logs {\n        "+src+"\n      }\n")))
		if err != nil || job.TaskGroups[0].Tasks[0].LogConfig.Disabled != want {
			t.Errorf("logs { %s }: %v, want disabled %v", src, err, want)
		}
	}

	// Their zero values ask for what drover does.
	ok := wrapGroup("    prevent_reschedule_on_lost = false\n    disconnect {\n      lost_after = \"0s\"\n      replace = true\n      reconcile = \"best_score\"\n    }\n" +
		"    task \"u\" {\n      driver = \"raw_exec\"\n      artifact {\n        source = \"https://x/a\"\n        insecure = false\n        chown = false\n      }\n" +
		"      template {\n        data = \"x\"\n        destination = \"local/x\"\n        once = false\n      }\n    }\n")
	if _, err := ParseAndValidate("job.hcl", []byte(ok)); err != nil {
		t.Errorf("zero-valued disconnect settings refused: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

package agent

import (
	"encoding/json"
	"strings"
	"testing"

	docker "github.com/drover-org/drover/plugins/driver-docker"
)

// The Nomad docker stanza, blocks included, reaches the docker plugin as
// JSON; bad keys and values fail the agent config with their position:
// the HCL shape when the file is parsed, the keys and values when the
// docker plugin judges them (at agent start).
func TestDockerPluginStanza(t *testing.T) {
	ds := driverChecker(t)
	for _, tc := range []struct {
		name    string
		src     string
		wantErr string
		want    map[string]any
	}{
		{name: "nomad's example", src: `plugin "docker" {
  config {
    endpoint         = "unix:///var/run/docker.sock"
    allow_privileged = true
    allow_caps       = ["chown", "net_raw"]
    gc {
      image       = true
      image_delay = "3m"
      container   = true
    }
    volumes {
      enabled = true
    }
  }
}
`, want: map[string]any{
			"endpoint": "unix:///var/run/docker.sock", "allow_privileged": true, "allow_caps": []any{"chown", "net_raw"},
			"gc":      map[string]any{"image": true, "image_delay": "3m", "container": true},
			"volumes": map[string]any{"enabled": true},
		}},
		{name: "nomad's other keys", src: `plugin "docker" {
  config {
    allow_runtimes = ["runc"]
    pids_limit     = 256
    extra_labels   = ["job_name", "task_name"]
    logging {
      type = "json-file"
      config {
        max-size = "10m"
      }
    }
    auth {
      config = "/root/.docker/config.json"
    }
    gc {
      dangling_containers {
        enabled = false
      }
    }
  }
}
`, want: map[string]any{
			"allow_runtimes": []any{"runc"}, "pids_limit": float64(256), "extra_labels": []any{"job_name", "task_name"},
			"logging": map[string]any{"type": "json-file", "config": map[string]any{"max-size": "10m"}},
			"auth":    map[string]any{"config": "/root/.docker/config.json"},
			"gc":      map[string]any{"dangling_containers": map[string]any{"enabled": false}},
		}},
		{name: "no config", src: `plugin "docker" {}`},
		{name: "unknown key", src: "plugin \"docker\" {\n  config {\n    allow_privilged = true\n  }\n}\n",
			wantErr: `x.hcl:2:3: plugin "docker": docker plugin config: unknown field "allow_privilged"`},
		{name: "unknown gc key", src: "plugin \"docker\" {\n  config {\n    gc {\n      imagee = true\n    }\n  }\n}\n",
			wantErr: `unknown field "imagee"`},
		{name: "bad delay", src: "plugin \"docker\" {\n  config {\n    gc {\n      image_delay = \"later\"\n    }\n  }\n}\n",
			wantErr: `gc.image_delay "later" must be a non-negative duration`},
		{name: "wrong type", src: "plugin \"docker\" {\n  config {\n    allow_privileged = \"yes\"\n  }\n}\n",
			wantErr: `allow_privileged: must be a bool, got string`},
		{name: "args", src: "plugin \"docker\" {\n  args = [\"-x\"]\n}\n", wantErr: `plugin "docker": args: the built-in docker driver takes no arguments`},
		{name: "block given twice", src: "plugin \"docker\" {\n  config {\n    gc {}\n    gc {}\n  }\n}\n", wantErr: `x.hcl:4:5: plugin "docker": config gc is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfigFragment("x.hcl", []byte(tc.src))
			if err == nil {
				err = checkStanzas(ds, cfg)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			env := dockerEnv(cfg.Plugins)
			if tc.want == nil {
				if len(env) != 0 {
					t.Fatalf("env = %q, want none", env)
				}
				return
			}
			if len(env) != 1 || !strings.HasPrefix(env[0], docker.ConfigEnvVar+"=") {
				t.Fatalf("env = %q", env)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(env[0], docker.ConfigEnvVar+"=")), &got); err != nil {
				t.Fatal(err)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tc.want)
			if string(gj) != string(wj) {
				t.Errorf("plugin config = %s\nwant %s", gj, wj)
			}
			if _, err := docker.ParsePluginConfig([]byte(strings.TrimPrefix(env[0], docker.ConfigEnvVar+"="))); err != nil {
				t.Errorf("the plugin refuses what the agent accepted: %v", err)
			}
		})
	}
}

package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/internal/testtier"
	rawexec "github.com/drover-org/drover/plugins/driver-rawexec"
	"github.com/drover-org/drover/sdk/shared"
)

// A Nomad client config's `plugin "raw_exec" { config { enabled = … } }`
// configures the built-in raw_exec driver: no binary in plugin_dir is
// looked for, and enabled = false leaves the driver running but
// undetected, so the node tells why nothing raw_exec is placed on it.
func TestAgentNomadRawExecStanza(t *testing.T) {
	testtier.Agent(t)
	for _, enabled := range []bool{true, false} {
		t.Run(map[bool]string{true: "enabled", false: "disabled"}[enabled], func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "extra.hcl")
			src := fmt.Sprintf("plugin \"raw_exec\" {\n  config {\n    enabled = %v\n  }\n}\n", enabled)
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
			if !slices.Contains(drivers, "driver-rawexec") {
				t.Errorf("driver plugins %v; want driver-rawexec running", drivers)
			}
			transport := &http.Transport{}
			defer transport.CloseIdleConnections()
			api := &testAPI{t: t, base: "http://" + a.HTTPAddr(), http: &http.Client{Transport: transport, Timeout: testTimeout}}
			waitFor(t, "the node's raw_exec driver info", func() (bool, string) {
				var nodes []struct{ ID string }
				api.get("/v1/nodes", &nodes)
				if len(nodes) != 1 {
					return false, fmt.Sprintf("%d nodes", len(nodes))
				}
				var node struct {
					Drivers map[string]struct {
						Detected, Healthy bool
						HealthDescription string
					}
				}
				api.get("/v1/node/"+nodes[0].ID, &node)
				d, ok := node.Drivers[rawexec.Name]
				want := ok && d.Detected == enabled && d.Healthy == enabled &&
					strings.Contains(d.HealthDescription, "disabled") != enabled
				return want, fmt.Sprintf("%+v", node.Drivers)
			})
		})
	}
}

// The raw_exec plugin's config: outside -dev the plugin's defaults
// (disabled, root denied, cgroups required), in -dev Nomad's (enabled) and
// no user denied; the stanza wins key by key either way.
func TestRawExecConfigDefaults(t *testing.T) {
	stanza := func(body string) []*PluginConfig {
		src := "data_dir = \"/x\"\nclient {\n enabled = true\n servers = [\"s:1\"]\n}\nplugin \"raw_exec\" {\n  config {\n" + body + "\n  }\n}\n"
		c, err := ParseConfig("agent.hcl", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return c.Plugins
	}
	for _, tc := range []struct {
		name    string
		plugins []*PluginConfig
		dev     bool
		want    rawexec.PluginConfig
	}{
		{"no stanza", nil, false, rawexec.PluginConfig{DeniedHostUsers: []string{"root"}}},
		{"no stanza, dev", nil, true, rawexec.PluginConfig{Enabled: true, DeniedHostUsers: []string{}, CgroupsOptional: true}},
		{"enabled", stanza("enabled = true"), false, rawexec.PluginConfig{Enabled: true, DeniedHostUsers: []string{"root"}}},
		{"dev, disabled", stanza("enabled = false"), true, rawexec.PluginConfig{DeniedHostUsers: []string{}, CgroupsOptional: true}},
		{"all keys", stanza("enabled = true\nno_cgroups = true\ndenied_host_users = [\"root\", \"admin\"]"), false,
			rawexec.PluginConfig{Enabled: true, NoCgroups: true, DeniedHostUsers: []string{"root", "admin"}}},
		{"root allowed", stanza("enabled = true\ndenied_host_users = []"), false, rawexec.PluginConfig{Enabled: true, DeniedHostUsers: []string{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := rawexecConfigJSON(tc.plugins, tc.dev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := rawexec.ParsePluginConfig(raw)
			if err != nil {
				t.Fatal(err)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tc.want)
			if string(gj) != string(wj) {
				t.Errorf("config %s\n got %s\nwant %s", raw, gj, wj)
			}
		})
	}
}

// The -dev agent serves Nomad's mock_driver and exec: a job written for
// Nomad's tests (mock_driver's run_for, stdout_string, exit_code) and an
// exec task, chrooted, run to completion, and their output is served.
func TestDevAgentRunsMockAndExecJobs(t *testing.T) {
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	a := startTestAgent(t, cfg, hclog.Debug)
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	api := &testAPI{t: t, base: "http://" + a.HTTPAddr(), http: &http.Client{Transport: transport, Timeout: testTimeout}}

	var drivers map[string]struct {
		Detected, Healthy bool
		HealthDescription string
	}
	waitFor(t, "a ready node with mock_driver and exec fingerprinted", func() (bool, string) {
		var nodes []struct{ ID, Status string }
		api.get("/v1/nodes", &nodes)
		if len(nodes) != 1 || nodes[0].Status != "ready" {
			return false, fmt.Sprintf("%+v", nodes)
		}
		var node struct {
			Drivers map[string]struct {
				Detected, Healthy bool
				HealthDescription string
			}
		}
		api.get("/v1/node/"+nodes[0].ID, &node)
		drivers = node.Drivers
		_, mock := drivers["mock_driver"]
		_, ex := drivers["exec"]
		return mock && ex && drivers["mock_driver"].Healthy, fmt.Sprintf("%+v", node.Drivers)
	})

	run := func(jobID, task, hcl, wantStatus, wantLog string) {
		t.Helper()
		status, jobJSON, _ := api.call(context.Background(), http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": hcl})
		if status != http.StatusOK {
			t.Fatalf("parse %s: %d %s", jobID, status, jobJSON)
		}
		if status, body, _ := api.call(context.Background(), http.MethodPut, "/v1/jobs", map[string]any{"Job": json.RawMessage(jobJSON)}); status != http.StatusOK {
			t.Fatalf("register %s: %d %s", jobID, status, body)
		}
		var alloc allocStub
		waitFor(t, jobID+"'s alloc "+wantStatus, func() (bool, string) {
			var allocs []allocStub
			api.get("/v1/job/"+jobID+"/allocations", &allocs)
			if len(allocs) != 1 || allocs[0].ClientStatus != wantStatus {
				return false, fmt.Sprintf("%+v", allocs)
			}
			alloc = allocs[0]
			return true, ""
		})
		status, body, _ := api.call(context.Background(), http.MethodGet,
			"/v1/client/fs/logs/"+alloc.ID+"?task="+task+"&type=stdout&plain=true", nil)
		if status != http.StatusOK || !strings.Contains(string(body), wantLog) {
			t.Errorf("%s's log: %d %q, want %q", jobID, status, body, wantLog)
		}
	}
	run("mock", "m", `job "mock" {
  type = "batch"
  group "g" {
    restart { attempts = 0 }
    reschedule { attempts = 0 }
    task "m" {
      driver = "mock_driver"
      config {
        run_for       = "100ms"
        exit_code     = 0
        stdout_string = "hello from the mock"
      }
    }
  }
}`, "complete", "hello from the mock")
	run("mockfail", "m", `job "mockfail" {
  type = "batch"
  group "g" {
    restart { attempts = 0 }
    reschedule { attempts = 0 }
    task "m" {
      driver = "mock_driver"
      config {
        exit_code     = 3
        stdout_string = "failing"
      }
    }
  }
}`, "failed", "failing")

	if d := drivers["exec"]; !d.Healthy {
		t.Skipf("exec undetected or unhealthy here: %s", d.HealthDescription)
	}
	run("isolated", "e", `job "isolated" {
  type = "batch"
  group "g" {
    restart { attempts = 0 }
    reschedule { attempts = 0 }
    task "e" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo uid=$(id -u) dir=$NOMAD_TASK_DIR; test -d /local && test ! -e /work && echo chrooted"]
      }
    }
  }
}`, "complete", "uid=65534 dir=/local\nchrooted")
}

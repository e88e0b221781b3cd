package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// startClusterAgent starts a non-dev agent, a one-server cluster with a
// client, from a config file (extra appended), and waits for its node. Its
// data dir is reachable by other users (tasks running as nobody enter
// their task dirs through it), as /var/lib/drover is. Tasks of a non-dev
// client outlive the agent, so cleanup kills what is left without calling
// it a leak.
func startClusterAgent(t *testing.T, extra string) *testAgent {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ports := harness.FreePorts(t, 2)
	cfg := loneServerConfig(t, dataDir, ports, "client {\n  enabled = true\n}\n"+extra)
	proc, err := harness.Start(droverBin, []string{"agent", "-config", cfg}, filepath.Join(dir, "agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	a := &testAgent{
		API: harness.NewAPI(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), droverBin, repoRoot),
		t:   t, DataDir: dataDir, proc: proc, leftoversChecked: true,
	}
	a.Alive = proc.Running
	t.Cleanup(func() {
		a.stop()
		harness.RemoveTaskCgroups(dataDir)
	})
	harness.WaitFor(t, agentReadyTimeout, "a ready node", func() (bool, string) {
		if !proc.Running() {
			t.Fatalf("agent exited:\n%s", proc.Log())
		}
		var nodes []struct{ ID, Status string }
		status, err := a.Do(http.MethodGet, "/v1/nodes", nil, &nodes)
		return err == nil && status == http.StatusOK && len(nodes) == 1 && nodes[0].Status == "ready", fmt.Sprintf("%d %v %+v", status, err, nodes)
	})
	return a
}

type rawExecDriverInfo struct {
	Detected, Healthy bool
	HealthDescription string
}

func (a *testAgent) rawExecInfo() (rawExecDriverInfo, bool) {
	var nodes []struct{ ID string }
	a.MustGet("/v1/nodes", &nodes)
	var node struct{ Drivers map[string]rawExecDriverInfo }
	a.MustGet("/v1/node/"+nodes[0].ID, &node)
	d, ok := node.Drivers["raw_exec"]
	return d, ok
}

// Outside -dev raw_exec is off unless the agent's config enables it: the
// node reports the driver undetected with the reason, and a raw_exec job
// is not placed there.
func TestRawExecDisabledOutsideDev(t *testing.T) {
	t.Parallel()
	a := startClusterAgent(t, "")
	harness.WaitFor(t, waitTimeout, "raw_exec fingerprinted", func() (bool, string) {
		d, ok := a.rawExecInfo()
		return ok && d.HealthDescription != "", fmt.Sprintf("%+v", d)
	})
	if d, _ := a.rawExecInfo(); d.Detected || d.Healthy || !strings.Contains(d.HealthDescription, "disabled") ||
		!strings.Contains(d.HealthDescription, `plugin "raw_exec" { config { enabled = true } }`) {
		t.Fatalf("raw_exec on a non-dev node = %+v; want undetected, saying how to enable it", d)
	}

	job := harness.WriteFile(t, "true.hcl", `job "true" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
`)
	a.MustCLI("job", "run", "-detach", job)
	harness.WaitFor(t, waitTimeout, "the placement to fail on the missing driver", func() (bool, string) {
		var evals []struct {
			Status         string
			FailedTGAllocs map[string]any
		}
		a.MustGet("/v1/job/true/evaluations", &evals)
		for _, e := range evals {
			if e.Status == "complete" && e.FailedTGAllocs["g"] != nil {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", evals)
	})
	if allocs := a.AllocsOf("true"); len(allocs) != 0 {
		t.Fatalf("a raw_exec job was placed on a node whose raw_exec is disabled: %+v", allocs)
	}
}

// allocOf waits until the job has one allocation with a client status in
// want and returns its ID.
func (a *testAgent) allocOf(ns, jobID string, want ...string) string {
	a.t.Helper()
	var id string
	harness.WaitFor(a.t, waitTimeout, jobID+"'s allocation "+strings.Join(want, "/"), func() (bool, string) {
		var allocs []struct{ ID, ClientStatus string }
		a.MustGet("/v1/job/"+jobID+"/allocations?namespace="+ns, &allocs)
		for _, al := range allocs {
			for _, w := range want {
				if al.ClientStatus == w {
					id = al.ID
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%+v", allocs)
	})
	return id
}

// taskLog reads a task's stdout as the client writes it.
func (a *testAgent) taskLog(allocID, task string) string {
	raw, _ := os.ReadFile(filepath.Join(a.DataDir, "alloc", allocID, "alloc", "logs", task+".stdout.0"))
	return string(raw)
}

// With raw_exec enabled, a task is no back door: a job in one namespace
// cannot read the environment (a secret) of another namespace's task
// through /proc, nor the node's private keys under the agent's data dir,
// because it runs as the user it names, and a task naming no user (which
// would run as root) is refused. A process a task detached with setsid is
// gone once its job is stopped.
func TestRawExecTaskIsolation(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent runs tasks as other users, in cgroups")
	}
	a := startClusterAgent(t, "plugin \"raw_exec\" {\n  config {\n    enabled = true\n  }\n}\n")
	harness.WaitFor(t, waitTimeout, "raw_exec fingerprinted", func() (bool, string) {
		d, ok := a.rawExecInfo()
		return ok && d.Detected && d.HealthDescription != "", fmt.Sprintf("%+v", d)
	})
	if d, _ := a.rawExecInfo(); !d.Healthy {
		if strings.Contains(d.HealthDescription, "cgroup") {
			t.Skipf("no writable cgroup hierarchy: %s", d.HealthDescription)
		}
		t.Fatalf("raw_exec enabled but unhealthy: %+v", d)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		a.MustWrite(http.MethodPut, "/v1/namespace/"+ns, map[string]string{"Name": ns}, nil)
	}
	// The data dir holds the node's private key; make sure there is one
	// for the probe to find.
	if out := grepKeys(t, a.DataDir); out == 0 {
		t.Fatalf("no private key under the data dir %s to protect", a.DataDir)
	}

	var b [8]byte
	_, _ = rand.Read(b[:])
	secret := "s3cret-" + hex.EncodeToString(b[:])
	// Team B's service holds a secret in its environment and detaches a
	// helper with setsid.
	vault := harness.WriteFile(t, "vault.hcl", fmt.Sprintf(`job "vault" {
  namespace = "team-b"
  type      = "service"
  group "g" {
    task "vault" {
      driver = "raw_exec"
      user   = "daemon"
      env {
        DB_PASSWORD = %q
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo helper=$!; exec sleep 600"]
      }
      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
`, secret))
	a.MustCLI("job", "run", "-detach", vault)
	vaultAlloc := a.allocOf("team-b", "vault", "running")
	var helper int
	harness.WaitFor(t, waitTimeout, "the vault task's helper pid", func() (bool, string) {
		log := a.taskLog(vaultAlloc, "vault")
		_, after, ok := strings.Cut(log, "helper=")
		if !ok {
			return false, log
		}
		var err error
		helper, err = strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
		return err == nil, log
	})
	t.Cleanup(func() { _ = syscall.Kill(helper, syscall.SIGKILL) })

	// Team A's probe looks for the secret in every process's environment
	// and for readable private keys under the data dir.
	probe := func(user string) string {
		userLine := ""
		if user != "" {
			userLine = fmt.Sprintf("      user   = %q\n", user)
		}
		script := fmt.Sprintf(`id -u; env=no; for f in /proc/[0-9]*/environ; do if grep -q %s "$f" 2>/dev/null; then env=yes; fi; done; echo "environ=$env"; echo "keys=$(grep -rl 'PRIVATE KEY' %s 2>/dev/null | wc -l)"; echo probed > local/result`, secret, a.DataDir)
		return harness.WriteFile(t, "probe.hcl", fmt.Sprintf(`job "probe" {
  namespace = "team-a"
  type      = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "probe" {
      driver = "raw_exec"
%s      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }
    }
  }
}
`, userLine, script))
	}

	// Naming no user would run the probe as root: refused at start.
	a.MustCLI("job", "run", "-detach", probe(""))
	rootAlloc := a.allocOf("team-a", "probe", "failed", "complete")
	status, body, err := a.Raw(http.MethodGet, "/v1/allocation/"+rootAlloc, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET allocation: %d %v", status, err)
	}
	// Errorf, not Fatalf, here and below: each way in is reported.
	if !strings.Contains(string(body), "denied_host_users") {
		t.Errorf("a task without a user ran (as root) on a non-dev node; log: %q\nalloc: %s", a.taskLog(rootAlloc, "probe"), body)
	}
	a.MustWrite(http.MethodDelete, "/v1/job/probe?namespace=team-a&purge=true", nil, nil)

	// As nobody it runs, writes its own dir, and reads neither secret.
	a.MustCLI("job", "run", "-detach", probe("nobody"))
	var probeAlloc string
	harness.WaitFor(t, waitTimeout, "the nobody probe to finish", func() (bool, string) {
		var allocs []struct{ ID, ClientStatus string }
		a.MustGet("/v1/job/probe/allocations?namespace=team-a", &allocs)
		for _, al := range allocs {
			if al.ID != rootAlloc && (al.ClientStatus == "complete" || al.ClientStatus == "failed") {
				probeAlloc = al.ID
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", allocs)
	})
	out := a.taskLog(probeAlloc, "probe")
	if got := strings.Fields(out); strings.Join(got, " ") != "65534 environ=no keys=0" {
		t.Errorf("probe output %q; want it to run as nobody (65534) and find neither team B's secret nor a private key", out)
	}
	if raw, err := os.ReadFile(filepath.Join(a.DataDir, "alloc", probeAlloc, "probe", "local", "result")); err != nil || strings.TrimSpace(string(raw)) != "probed" {
		t.Errorf("the probe could not write its local dir: %q %v", raw, err)
	}

	// Stopping team B's job ends its setsid helper too.
	if !harness.PIDAlive(helper) {
		t.Fatalf("the helper %d died before the job stopped", helper)
	}
	a.MustWrite(http.MethodDelete, "/v1/job/vault?namespace=team-b", nil, nil)
	a.allocOf("team-b", "vault", "complete")
	harness.WaitFor(t, waitTimeout, "the setsid helper to be gone after job stop", func() (bool, string) {
		return !harness.PIDAlive(helper), fmt.Sprintf("pid %d alive", helper)
	})
}

// grepKeys counts files holding a private key under dir, as root sees them.
func grepKeys(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if raw, err := os.ReadFile(path); err == nil && strings.Contains(string(raw), "PRIVATE KEY") {
			n++
		}
		return nil
	})
	return n
}

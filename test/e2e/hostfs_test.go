package e2e

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// Issue 26: a task must not reach the host through its allocation
// directory. The client and the drivers run as root and work in alloc/logs,
// which the task can write: a link the task plants there must never be
// followed, to read a host file through the logs API or to write one
// through the log rotation.

// hostSecret is a root-only host file (0600) outside every allocation,
// with an mtime in the past; unchanged reports whether its content and
// mtime are still the same.
func hostSecret(t *testing.T) (path, content string, unchanged func() (bool, string)) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "host-secret")
	content = fmt.Sprintf("drover-host-secret-%d", time.Now().UnixNano())
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	return path, content, func() (bool, string) {
		b, err := os.ReadFile(path)
		fi, serr := os.Stat(path)
		if err != nil || serr != nil {
			return false, fmt.Sprintf("host file: %v %v", err, serr)
		}
		snip := string(b[:min(len(b), 200)])
		return string(b) == content && fi.ModTime().Equal(old), fmt.Sprintf("content %q, mtime %v (want %v)", snip, fi.ModTime(), old)
	}
}

// plantedJob is a batch job of one task "t" running sh -c script, on
// driver ("docker" or "raw_exec"), its logs rotated at 1 MB into 10 files.
func plantedJob(id, driver, script string) string {
	config := fmt.Sprintf("command = %q\n        args    = [\"-c\", %q]", "/bin/sh", script)
	if driver == "docker" {
		config = fmt.Sprintf("image   = %q\n        command = \"sh\"\n        args    = [\"-c\", %q]", e2eBusybox, script)
	}
	return fmt.Sprintf(`job %q {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "t" {
      driver = %q
      config {
        %s
      }
      logs {
        max_files     = 10
        max_file_size = 1
      }
      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
`, id, driver, config)
}

// logsFor returns the alloc's logs directory on the host.
func logsFor(a *testAgent, allocID string) string {
	return filepath.Join(a.DataDir, "alloc", allocID, "alloc", "logs")
}

// runPlanted runs the job and waits for its one alloc to reach status.
func runPlanted(t *testing.T, a *testAgent, id, src, status string) harness.Alloc {
	t.Helper()
	a.MustCLI("job", "run", "-detach", writeJobFile(t, src))
	var alloc harness.Alloc
	harness.WaitFor(t, waitTimeout, "the alloc to be "+status, func() (bool, string) {
		allocs := a.AllocsOf(id)
		if len(allocs) != 1 {
			return false, fmt.Sprintf("%+v", allocs)
		}
		alloc = allocs[0]
		return alloc.ClientStatus == status, fmt.Sprintf("%+v", allocs)
	})
	removeContainersOf(t, alloc.ID)
	return alloc
}

// (a) The task replaces its stdout log by a symlink to a root-only host
// file: the logs API refuses it (403, naming the file) and the file's
// content never appears, plain or framed (base64 in JSON), nor through
// `drover alloc logs`.
func testLogsRefusePlantedSymlink(t *testing.T, a *testAgent, driver string) {
	host, secret, _ := hostSecret(t)
	dir := "/alloc/logs"
	if driver != "docker" {
		dir = "$NOMAD_ALLOC_DIR/logs"
	}
	id := "planted-read-" + strings.ReplaceAll(driver, "_", "-")
	// The link replaces the log file once the writer has it open (its
	// first line is in it): a writer that opens the log after the link
	// was planted replaces the link itself.
	script := fmt.Sprintf("echo before; while ! grep -q before %[2]s/t.stdout.0; do sleep 0.1; done; "+
		"ln -sf %[1]s %[2]s/t.stdout.0 && echo planted >&2; sleep 600", host, dir)
	alloc := runPlanted(t, a, id, plantedJob(id, driver, script), "running")
	defer a.CLI("job", "stop", "-purge", id)
	link := filepath.Join(logsFor(a, alloc.ID), "t.stdout.0")
	harness.WaitFor(t, waitTimeout, "the task to plant its link", func() (bool, string) {
		fi, err := os.Lstat(link)
		return err == nil && fi.Mode()&os.ModeSymlink != 0, fmt.Sprintf("%v %v", fi, err)
	})
	leaks := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))}
	for _, q := range []string{"plain=true", "plain=false", "plain=true&origin=end&offset=100"} {
		status, body, err := a.Raw(http.MethodGet, "/v1/client/fs/logs/"+alloc.ID+"?task=t&type=stdout&"+q, nil)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for _, l := range leaks {
			if strings.Contains(string(body), l) {
				t.Fatalf("%s: the logs API served the host file: status %d, %q", q, status, body)
			}
		}
		if status != http.StatusForbidden || !strings.Contains(string(body), "t.stdout.0") {
			t.Errorf("%s: status %d %q; want 403 naming t.stdout.0", q, status, body)
		}
	}
	res := a.CLI("alloc", "logs", alloc.ID)
	if strings.Contains(res.String(), secret) {
		t.Fatalf("alloc logs served the host file: %s", res)
	}
	if res.Code == 0 {
		t.Errorf("alloc logs: %s; want a refusal", res)
	}
	// The task's other stream is still served.
	if errs := a.MustCLI("alloc", "logs", "-stderr", alloc.ID); !strings.Contains(errs.Stdout, "planted") {
		t.Errorf("alloc logs -stderr = %s", errs)
	}
}

// (b) The task plants t.stdout.1..4 as symlinks to a host file, then
// prints more than max_file_size: the rotation writes its log files in
// the links' place, and the host file's content and mtime are unchanged.
func testRotationSparesHostFile(t *testing.T, a *testAgent, driver string) {
	host, _, unchanged := hostSecret(t)
	dir := "/alloc/logs"
	if driver != "docker" {
		dir = "$NOMAD_ALLOC_DIR/logs"
	}
	id := "planted-rotate-" + strings.ReplaceAll(driver, "_", "-")
	// 1.5 MB of output: across t.stdout.0 into t.stdout.1.
	script := fmt.Sprintf("for i in 1 2 3 4; do ln -sf %s %s/t.stdout.$i; done; "+
		"i=0; while [ $i -lt 30000 ]; do echo \"line $i of fifty bytes of the task's output....\"; i=$((i+1)); done; echo done", host, dir)
	alloc := runPlanted(t, a, id, plantedJob(id, driver, script), "complete")
	defer a.CLI("job", "stop", "-purge", id)
	logs := logsFor(a, alloc.ID)
	// The output ends in a regular log file: the newest one the rotation
	// wrote, in a planted link's place or after them (when the writer
	// opened the log after the task planted them, it resumed at the
	// newest).
	harness.WaitFor(t, waitTimeout, "the whole output in the logs", func() (bool, string) {
		if ok, why := unchanged(); !ok {
			t.Fatalf("the rotation wrote the host file: %s", why)
		}
		ents, err := os.ReadDir(logs)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range ents {
			seen = append(seen, e.Name()+" "+e.Type().String())
			if !strings.HasPrefix(e.Name(), "t.stdout.") || !e.Type().IsRegular() {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(logs, e.Name())); err == nil && strings.HasSuffix(string(b), "done\n") {
				return true, ""
			}
		}
		return false, strings.Join(seen, ", ")
	})
	if ok, why := unchanged(); !ok {
		t.Fatalf("the rotation wrote the host file: %s", why)
	}
}

func TestDockerLogsRefusePlantedSymlink(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	testLogsRefusePlantedSymlink(t, startDockerAgent(t), "docker")
}

func TestDockerLogRotationSparesHostFile(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	testRotationSparesHostFile(t, startDockerAgent(t), "docker")
}

func TestRawExecLogsRefusePlantedSymlink(t *testing.T) {
	t.Parallel()
	testLogsRefusePlantedSymlink(t, startAgent(t), "raw_exec")
}

func TestRawExecLogRotationSparesHostFile(t *testing.T) {
	t.Parallel()
	testRotationSparesHostFile(t, startAgent(t), "raw_exec")
}

// A docker task that replaces the source of one of its relative volumes
// (local/data) by a symlink to a host directory, then fails, is restarted
// without the host directory bound into its container: the restart is
// refused naming the source, and the host file never reaches the task.
func TestDockerBindSourceSwappedBeforeRestart(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	hostDir := t.TempDir()
	secret := fmt.Sprintf("drover-host-dir-secret-%d", time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(hostDir, "secret"), []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf("if [ -e /local/marker ]; then echo second run; cat /data/secret; exit 0; fi; "+
		"touch /local/marker; rm -rf /local/data; ln -s %s /local/data; echo first run; exit 1", hostDir)
	src := fmt.Sprintf(`job "bind-swap" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    restart {
      attempts = 1
      delay    = "1s"
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "t" {
      driver = "docker"
      config {
        image   = %q
        command = "sh"
        args    = ["-c", %q]
        volumes = ["local/data:/data"]
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`, e2eBusybox, script)
	a.MustCLI("job", "run", "-detach", writeJobFile(t, src))
	var alloc harness.Alloc
	harness.WaitFor(t, waitTimeout, "the alloc to end", func() (bool, string) {
		allocs := a.AllocsOf("bind-swap")
		if len(allocs) != 1 {
			return false, fmt.Sprintf("%+v", allocs)
		}
		alloc = allocs[0]
		return alloc.ClientStatus == "failed" || alloc.ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	removeContainersOf(t, alloc.ID)
	logs := a.CLI("alloc", "logs", alloc.ID).String() + a.CLI("alloc", "logs", "-stderr", alloc.ID).String()
	if strings.Contains(logs, secret) || strings.Contains(logs, "second run") {
		t.Fatalf("the restarted task ran with the host directory bound: %s", logs)
	}
	if alloc.ClientStatus != "failed" {
		t.Errorf("alloc %s, want failed (the restart refused)", alloc.ClientStatus)
	}
	var refused bool
	for _, ev := range taskEvents(t, a, alloc.ID, "t") {
		if strings.Contains(ev.DisplayMessage+ev.Message, filepath.Join(alloc.ID, "t", "local", "data")) &&
			strings.Contains(ev.DisplayMessage+ev.Message, "unsafe path") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("no task event names the refused bind source: %+v", taskEvents(t, a, alloc.ID, "t"))
	}
}

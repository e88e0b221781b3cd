package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// plantedSymlinkJob: in each group a prestart task plants alloc/x -> a
// host directory; the main task of one renders a template through it, the
// other's fetches an artifact through it. Format with the job ID, the driver, the prestart task's
// config, the main tasks' config, the host directory and the artifact URL.
const plantedSymlinkJob = `job %[1]q {
  type        = "batch"
  datacenters = ["*"]

  group "tpl" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "plant" {
      driver = %[2]q

      lifecycle {
        hook = "prestart"
      }

      config {
        %[3]s
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }

    task "main" {
      driver = %[2]q

      template {
        data        = "pwned\n"
        destination = "../alloc/x/pwned.txt"
      }

      config {
        %[4]s
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }

  group "art" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "plant" {
      driver = %[2]q

      lifecycle {
        hook = "prestart"
      }

      config {
        %[3]s
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }

    task "art" {
      driver = %[2]q

      artifact {
        source      = "%[6]s/payload.txt"
        destination = "../alloc/x/fetched/"
      }

      config {
        %[4]s
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// checkPlantedSymlink runs plantedSymlinkJob and checks that the host
// directory stays empty and both main tasks fail with the refusal.
func checkPlantedSymlink(t *testing.T, a *testAgent, id, driver, plantConfig, mainConfig string) {
	t.Helper()
	host := t.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("payload\n")) }))
	t.Cleanup(srv.Close)
	job := writeJobFile(t, fmt.Sprintf(plantedSymlinkJob, id, driver, fmt.Sprintf(plantConfig, host), mainConfig, host, srv.URL))
	if run := a.CLI("job", "run", "-detach", job); run.Code != 0 {
		t.Fatalf("job run:\n%s", run)
	}
	allocOf := map[string]string{} // task -> its alloc, once dead
	harness.WaitFor(t, waitTimeout, "the main tasks to be dead", func() (bool, string) {
		allocs := a.AllocsOf(id)
		for _, al := range allocs {
			for _, name := range []string{"main", "art"} {
				if st := al.TaskStates[name]; st != nil && st.State == "dead" {
					allocOf[name] = al.ID
				}
			}
		}
		return allocOf["main"] != "" && allocOf["art"] != "", fmt.Sprintf("%+v", allocs)
	})
	for _, tc := range []struct{ task, want string }{
		{"main", "../alloc/x/pwned.txt"},
		{"art", "alloc/x/fetched"},
	} {
		events := taskEvents(t, a, allocOf[tc.task], tc.task)
		found := false
		for _, ev := range events {
			msg := ev.DisplayMessage + " " + ev.Message
			if strings.Contains(msg, "crosses a symbolic link") && strings.Contains(msg, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s task events %+v: no refusal naming %q", tc.task, events, tc.want)
		}
	}
	ents, err := os.ReadDir(host)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("the host directory %s holds %v", host, ents)
	}
	if _, err := os.Lstat(filepath.Join(host, "pwned.txt")); err == nil {
		t.Errorf("the template was written on the host")
	}
}

// A raw_exec prestart task plants a symlink to a host directory in the
// shared alloc/ directory; the main task's template and another task's
// artifact, whose destinations cross it, are refused with an event naming
// the destination, and nothing lands on the host.
func TestTemplateAndArtifactThroughPlantedSymlink(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	checkPlantedSymlink(t, a, "planted-raw", "raw_exec",
		`command = "/bin/sh"
        args    = ["-c", "ln -s %s $${NOMAD_ALLOC_DIR}/x"]`,
		`command = "/bin/true"`)
}

// The same with docker tasks: the symlink a container plants names a
// host path to the client, which renders on the host.
func TestDockerTemplateThroughPlantedSymlink(t *testing.T) {
	t.Parallel()
	needDockerImage(t)
	a := startDockerAgent(t)
	checkPlantedSymlink(t, a, "planted-docker", "docker",
		`image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "ln -s %s /alloc/x"]`,
		`image   = "`+e2eBusybox+`"
        command = "true"`)
}

// An artifact that reads the client's disk is refused at job run, naming
// the artifact and the rule; nothing is registered.
func TestArtifactLocalSourceRefusedAtSubmit(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	job := writeJobFile(t, `job "git-file" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    task "t" {
      driver = "raw_exec"
      artifact {
        source = "git::file:///etc"
      }
      config {
        command = "/bin/true"
      }
    }
  }
}
`)
	res := a.CLI("job", "run", job)
	if res.Code == 0 || !strings.Contains(res.Stderr+res.Stdout, "artifact 1: source: file:// sources are refused") {
		t.Errorf("job run of a git::file artifact: want a refusal naming the rule:\n%s", res)
	}
	if status, _, err := a.Raw(http.MethodGet, "/v1/job/git-file", nil); err != nil || status != http.StatusNotFound {
		t.Errorf("GET /v1/job/git-file: %d %v, want 404", status, err)
	}
}

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// hostVolumeJob is a batch job of one raw_exec task with the group's host
// volume "data" (source %q, read_only %t) mounted at data, running sh -c
// %q in its task dir. Format it with the job ID first.
const hostVolumeJob = `job %q {
  type        = "batch"
  datacenters = ["*"]

  group "g" {
    volume "data" {
      type      = "host"
      source    = %q
      read_only = %t
    }

    volume "certs" {
      type      = "host"
      source    = "certs"
      read_only = true
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }

      volume_mount {
        volume      = "data"
        destination = "data"
        read_only   = %t
      }

      volume_mount {
        volume      = "certs"
        destination = "/certs"
        read_only   = true
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// An operator declares host volumes in the client's agent config; the
// node reports them (Nomad's HostVolumes, read with nomad/api); a raw_exec
// job writes into the read-write one at <task dir>/data and is refused by
// the read-only one; a second job's allocation reads what the first wrote;
// nothing stays mounted once they are done. A job asking for a volume the
// node lacks, or for writing one the node has read-only, places nothing
// and job status says "missing compatible host volumes".
func TestHostVolumesOnDevAgent(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("host volumes are bind mounts: the agent must run as root")
	}
	shared, certs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(certs, "ca.pem"), []byte("CA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := harness.WriteFile(t, "hostvol.hcl", fmt.Sprintf(`client {
  host_volume "shared" {
    path = %q
  }
  host_volume "certs" {
    path      = %q
    read_only = true
  }
}
`, shared, certs))
	a := startAgent(t, "-config", cfg)
	nc := a.nomadClient()
	node, _, err := nc.Nodes().Info(a.NodeID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if hv := node.HostVolumes; len(hv) != 2 || hv["shared"] == nil || hv["shared"].Path != shared || hv["shared"].ReadOnly ||
		hv["certs"] == nil || hv["certs"].Path != certs || !hv["certs"].ReadOnly {
		t.Fatalf("node HostVolumes = %+v", hv)
	}

	writer := `echo "from $NOMAD_ALLOC_ID" > data/msg && cat /dev/null > data/ok && ` +
		`if echo x > "$NOMAD_TASK_DIR/../certs/w" 2>/dev/null; then echo WROTE > data/certs-verdict; else echo REFUSED > data/certs-verdict; fi`
	a.MustCLI("job", "run", harness.WriteFile(t, "writer.hcl", fmt.Sprintf(hostVolumeJob, "e2e-hv-writer", "shared", false, writer, false)))
	waitJobDeadComplete(t, a, "e2e-hv-writer")
	wAllocs := a.AllocsOf("e2e-hv-writer")
	msg, err := os.ReadFile(filepath.Join(shared, "msg"))
	if err != nil || len(wAllocs) != 1 || string(msg) != "from "+wAllocs[0].ID+"\n" {
		t.Fatalf("the writer's file in the host volume = %q, %v (allocs %+v)", msg, err, wAllocs)
	}
	if v, _ := os.ReadFile(filepath.Join(shared, "certs-verdict")); string(v) != "REFUSED\n" {
		t.Errorf("write into the read-only volume: %q, want REFUSED", v)
	}
	if _, err := os.Stat(filepath.Join(certs, "w")); err == nil {
		t.Error("the read-only host volume was written")
	}

	// Another allocation, of another job, mounts the volume read-only
	// and reads what the writer left; its own write is refused.
	reader := `cat data/msg; if echo x > data/w 2>/dev/null; then echo WROTE; else echo REFUSED; fi`
	a.MustCLI("job", "run", harness.WriteFile(t, "reader.hcl", fmt.Sprintf(hostVolumeJob, "e2e-hv-reader", "shared", true, reader, true)))
	waitJobDeadComplete(t, a, "e2e-hv-reader")
	rAllocs := a.AllocsOf("e2e-hv-reader")
	if len(rAllocs) != 1 {
		t.Fatalf("reader allocs = %+v", rAllocs)
	}
	logs := a.MustCLI("alloc", "logs", rAllocs[0].ID, "t").Stdout
	if logs != "from "+wAllocs[0].ID+"\nREFUSED\n" {
		t.Errorf("the reader's output %q, want the writer's message and its own write refused", logs)
	}
	if _, err := os.Stat(filepath.Join(shared, "w")); err == nil {
		t.Error("a read-only mount took a write")
	}

	harness.WaitFor(t, waitTimeout, "no mount left beneath the agent's data dir", func() (bool, string) {
		m := hostMountsUnder(t, a.DataDir)
		return len(m) == 0, strings.Join(m, " ")
	})

	for _, c := range []struct{ id, source string }{{"e2e-hv-missing", "nope"}, {"e2e-hv-rw-on-ro", "certs"}} {
		a.MustCLI("job", "run", "-detach", harness.WriteFile(t, c.id+".hcl", fmt.Sprintf(hostVolumeJob, c.id, c.source, false, "true", false)))
		harness.WaitFor(t, waitTimeout, c.id+": a placement failure for the host volume", func() (bool, string) {
			evals, _, err := nc.Jobs().Evaluations(c.id, nil)
			if err != nil {
				return false, err.Error()
			}
			for _, ev := range evals {
				if m := ev.FailedTGAllocs["g"]; m != nil && m.ConstraintFiltered["missing compatible host volumes"] == 1 {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d evals", len(evals))
		})
		out := a.MustCLI("job", "status", c.id).Stdout
		if !strings.Contains(out, `* Constraint "missing compatible host volumes": 1 nodes excluded by filter`) {
			t.Errorf("%s: job status lacks the host volume placement failure:\n%s", c.id, out)
		}
	}
}

// waitJobDeadComplete waits until the batch job is dead with every
// allocation complete.
func waitJobDeadComplete(t *testing.T, a *testAgent, id string) {
	t.Helper()
	harness.WaitFor(t, waitTimeout, id+" dead with its allocs complete", func() (bool, string) {
		out := a.CLI("job", "status", id).Stdout
		status, _ := kvField(out, "Status")
		allocs := harness.Table(section(out, "Allocations"))
		if status != "dead" || len(allocs) == 0 {
			return false, out
		}
		for _, al := range allocs {
			if al["Status"] != "complete" {
				return false, out
			}
		}
		return true, out
	})
}

// A docker task on a real agent sees its host volumes at their
// destinations: it writes into the read-write one (the file lands in the
// operator's directory) and is refused by the read-only one. Skipped with
// the reason without a Docker engine.
func TestHostVolumesDockerOnDevAgent(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("host volumes are bind mounts: the agent must run as root")
	}
	needDockerImage(t)
	shared, certs := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(certs, "ca.pem"), []byte("CA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "docker-hv.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`plugin "docker" {
  config {
    gc {
      image = false
    }
  }
}

client {
  host_volume "shared" {
    path = %q
  }
  host_volume "certs" {
    path      = %q
    read_only = true
  }
}
`, shared, certs)), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, "-config", cfg)
	job := writeJobFile(t, `job "docker-hv" {
  type        = "batch"
  datacenters = ["*"]
  group "g" {
    volume "data" {
      type   = "host"
      source = "shared"
    }
    volume "certs" {
      type      = "host"
      source    = "certs"
      read_only = true
    }
    task "t" {
      driver = "docker"
      config {
        image   = "`+e2eBusybox+`"
        command = "sh"
        args    = ["-c", "echo from-docker > /var/lib/app/out && cat /etc/app/ca.pem && if echo x > /etc/app/w 2>/dev/null; then echo WROTE; else echo REFUSED; fi"]
      }
      volume_mount {
        volume      = "data"
        destination = "/var/lib/app"
      }
      volume_mount {
        volume      = "certs"
        destination = "/etc/app"
        read_only   = true
      }
      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`)
	a.MustCLI("job", "run", job)
	var allocs []harness.Alloc
	harness.WaitFor(t, waitTimeout, "the docker alloc to complete", func() (bool, string) {
		allocs = a.AllocsOf("docker-hv")
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	if b, err := os.ReadFile(filepath.Join(shared, "out")); err != nil || string(b) != "from-docker\n" {
		t.Errorf("the container's file in the host volume = %q, %v", b, err)
	}
	if logs := a.MustCLI("alloc", "logs", allocs[0].ID).Stdout; logs != "CA\nREFUSED\n" {
		t.Errorf("alloc logs = %q; want the read-only volume read and its write refused", logs)
	}
	if _, err := os.Stat(filepath.Join(certs, "w")); err == nil {
		t.Error("the read-only host volume was written")
	}
	harness.WaitFor(t, waitTimeout, "no mount left beneath the agent's data dir", func() (bool, string) {
		m := hostMountsUnder(t, a.DataDir)
		return len(m) == 0, strings.Join(m, " ")
	})
}

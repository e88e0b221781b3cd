package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/agent"
	"github.com/drover-org/drover/core/jobspec"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// csiPluginJob runs the hostpath CSI driver (examples/csi/hostpath) as a
// system job with a csi_plugin block. Its state directory is one the
// benchmark chose, so that it can see the volume's files from outside.
const csiPluginJob = `job "hostpath-plugin" {
  type        = "system"
  datacenters = ["*"]

  group "nodes" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = %q
        args    = ["-state-dir", %q, "-node-id", "${node.unique.id}", "-log-level", "warn"]
      }

      csi_plugin {
        id             = "hostpath"
        type           = "monolith"
        health_timeout = "1m"
      }

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
`

// csiWriterJob is a batch job whose task writes a marker file through the
// volume mounted at <task dir>/../data, then stays running until stopped.
const csiWriterJob = `job %q {
  type        = "batch"
  datacenters = ["*"]

  group "g" {
    volume "data" {
      type            = "csi"
      source          = "bench-vol"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo ok > \"${NOMAD_TASK_DIR}/../data/%s\" && exec sleep 3600"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`

// goTool is the go command that builds the hostpath driver.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// waitState blocks on the server's state store until cond holds, waking
// on every write to the tables cond reads (it adds them to ws), for at
// most 60s.
func waitState(b *testing.B, a *agent.Agent, what string, cond func(ws memdb.WatchSet, s *state.StateStore) (bool, error)) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ok bool
	_, err := a.Server().State().BlockingQuery(ctx, 1, func(ws memdb.WatchSet, s *state.StateStore) (uint64, error) {
		var err error
		if ok, err = cond(ws, s); err != nil || ok {
			return 2, err
		}
		return 1, nil // not yet: block until ws fires
	})
	if err == nil && !ok {
		err = ctx.Err()
	}
	if err != nil {
		b.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitFile polls for path every 200µs (a file change has no cheaper
// signal here), for at most 60s.
func waitFile(b *testing.B, path string) {
	b.Helper()
	tick := time.NewTicker(200 * time.Microsecond)
	defer tick.Stop()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		} else if !errors.Is(err, os.ErrNotExist) {
			b.Fatal(err)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s not written within 60s", path)
		}
		<-tick.C
	}
}

// BenchmarkCSIVolumeClaim measures a CSI volume's claim and release on the
// dev agent with the hostpath driver running as a system job, per
// iteration with a fresh writer job:
//
//   - claim-to-running-ms: from the job's registration to its task running
//     with the volume mounted — the task has written a marker file through
//     the mount and the benchmark sees it in the driver's volume
//     directory. This covers scheduling with the volume's feasibility, the
//     claim through Raft, controller publish, node stage and publish, and
//     the bind mount into the task.
//   - stop-to-freed-ms: from the job's deregistration (job stop) to the
//     volume holding no claim at all (no read, write or past claim): the
//     task killed, the node unpublish and unstage, the client's release
//     and the server's controller unpublish and free through Raft.
//
// The plugin job and the volume (created through the driver's controller)
// are set up once, outside the timer.
func BenchmarkCSIVolumeClaim(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the hostpath driver bind-mounts volumes: needs root")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "drover-csi-hostpath")
	build := exec.Command(goTool(), "build", "-o", bin, "./examples/csi/hostpath")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the hostpath driver: %v\n%s", err, out)
	}
	stateDir := filepath.Join(dir, "hostpath")

	a := startDevAgent(b)
	defer a.Shutdown()
	waitReadyNode(b, a)
	srv := a.Server()
	ctx := context.Background()
	register := func(src string) {
		b.Helper()
		job, err := jobspec.Parse("job.hcl", []byte(src))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := srv.Jobs().Register(ctx, job, false, 0); err != nil {
			b.Fatal(err)
		}
	}

	register(fmt.Sprintf(csiPluginJob, bin, stateDir))
	waitState(b, a, "the hostpath plugin to be healthy", func(ws memdb.WatchSet, s *state.StateStore) (bool, error) {
		p, err := s.CSIPluginByID(ws, "hostpath")
		return p != nil && p.ControllersHealthy == 1 && p.NodesHealthy == 1, err
	})
	vols, _, err := srv.CSI().CreateCSIVolumes(ctx, []*structs.CSIVolume{{
		ID: "bench-vol", Name: "bench-vol", Namespace: structs.DefaultNamespace, PluginID: "hostpath",
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	volDir := filepath.Join(stateDir, "volumes", vols[0].ExternalID)
	if _, err := os.Stat(volDir); err != nil {
		b.Fatalf("the driver's volume directory: %v", err)
	}

	freed := func(ws memdb.WatchSet, s *state.StateStore) (bool, error) {
		v, err := s.CSIVolumeRaw(ws, structs.DefaultNamespace, "bench-vol")
		if err != nil || v == nil {
			return false, err
		}
		return !v.InUse(), nil
	}
	run := func(id string) (claim, free time.Duration) {
		marker := filepath.Join(volDir, id)
		start := time.Now()
		register(fmt.Sprintf(csiWriterJob, id, id))
		waitFile(b, marker)
		claim = time.Since(start)

		// The claim is the job's, taken.
		v, err := srv.State().CSIVolumeRaw(nil, structs.DefaultNamespace, "bench-vol")
		if err != nil {
			b.Fatal(err)
		}
		allocs, err := srv.State().AllocsByJob(nil, structs.DefaultNamespace, id, false)
		if err != nil || len(allocs) != 1 {
			b.Fatalf("job %s: allocs %d, %v", id, len(allocs), err)
		}
		if c := v.WriteClaims[allocs[0].ID]; c == nil || c.State != structs.CSIVolumeClaimStateTaken {
			b.Fatalf("job %s runs without a taken write claim: %+v", id, v.WriteClaims)
		}

		start = time.Now()
		if _, err := srv.Jobs().Deregister(ctx, structs.DefaultNamespace, id, false); err != nil {
			b.Fatal(err)
		}
		waitState(b, a, "the claim of "+id+" to be freed", freed)
		free = time.Since(start)

		if _, err := srv.Jobs().Deregister(ctx, structs.DefaultNamespace, id, true); err != nil {
			b.Fatal(err)
		}
		return claim, free
	}

	// Leave nothing behind: the volume deleted through the controller,
	// the driver's task stopped (a client's shutdown leaves tasks running).
	defer func() {
		if _, err := srv.CSI().DeleteCSIVolume(ctx, structs.DefaultNamespace, "bench-vol", nil); err != nil {
			b.Error(err)
		}
		if _, err := srv.Jobs().Deregister(ctx, structs.DefaultNamespace, "hostpath-plugin", true); err != nil {
			b.Fatal(err)
		}
		waitState(b, a, "the plugin to go", func(ws memdb.WatchSet, s *state.StateStore) (bool, error) {
			p, err := s.CSIPluginByID(ws, "hostpath")
			return p == nil, err
		})
	}()

	run("warmup")
	b.ResetTimer()
	var claimTotal, freeTotal time.Duration
	for i := 0; i < b.N; i++ {
		c, f := run(fmt.Sprintf("writer-%d", i))
		claimTotal += c
		freeTotal += f
	}
	b.StopTimer()
	claimMS := float64(claimTotal.Microseconds()) / float64(b.N) / 1000
	freeMS := float64(freeTotal.Microseconds()) / float64(b.N) / 1000
	b.ReportMetric(claimMS, "claim-to-running-ms")
	b.ReportMetric(freeMS, "stop-to-freed-ms")
	fmt.Printf("CSI hostpath volume: submit to task running with the mount %.0f ms, stop to claim freed %.0f ms\n", claimMS, freeMS)
}

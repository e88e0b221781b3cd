package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// hostpathPluginJob runs the repository's hostpath CSI driver as a system
// job's task: the client gives it its socket (CSI_ENDPOINT) and
// supervises it through the csi-bridge.
const hostpathPluginJob = `job "hostpath-plugin" {
  type        = "system"
  datacenters = ["*"]

  group "nodes" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = %q
        args    = ["-state-dir", "${NOMAD_ALLOC_DIR}/hostpath", "-node-id", "${node.unique.id}"]
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

// hostpathVolume registers volume e2e-data with the external ID given.
const hostpathVolume = `id          = "e2e-data"
name        = "e2e-data"
type        = "csi"
plugin_id   = "hostpath"
external_id = %q

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

secrets {
  token = "s3cr3t"
}
`

// hostpathSourceVolume is a volume made through the controller, to be
// registered again by its external ID.
const hostpathSourceVolume = `id        = "e2e-src"
type      = "csi"
plugin_id = "hostpath"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
`

// The hostpath driver runs as a job on the dev agent: its plugin becomes
// healthy with a controller and a node instance, a volume registers
// against it (secrets never shown) once its controller confirms the
// driver has it and supports its capabilities, and stopping the plugin
// job takes the instances away.
func TestCSIHostpathPluginOnDevAgent(t *testing.T) {
	t.Parallel()
	bin := harness.BuiltCopy(t, "./examples/csi/hostpath", "drover-csi-hostpath")
	a := startAgent(t)
	a.MustCLI("job", "run", harness.WriteFile(t, "plugin.hcl", fmt.Sprintf(hostpathPluginJob, bin)))

	type plugin struct {
		ID                                 string
		ControllersHealthy, NodesHealthy   int
		ControllersExpected, NodesExpected int
		Provider                           string
		Nodes, Controllers                 map[string]struct{ Healthy bool }
		Allocations                        []struct{ ID string }
	}
	var p plugin
	harness.WaitFor(t, waitTimeout, "the hostpath plugin to be healthy", func() (bool, string) {
		status, err := a.Do("GET", "/v1/plugin/csi/hostpath", nil, &p)
		if err != nil || status != 200 {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		return p.NodesHealthy == 1 && p.ControllersHealthy == 1, fmt.Sprintf("%+v", p)
	})
	if p.Provider != "hostpath.csi.drover.dev" || p.Nodes[a.NodeID()].Healthy != true || len(p.Allocations) != 1 ||
		p.ControllersExpected != 1 || p.NodesExpected != 1 {
		t.Errorf("plugin: %+v", p)
	}
	out := a.MustCLI("plugin", "status")
	// Healthy/expected: the plugin job's one alloc is expected as both.
	if !strings.Contains(out.Stdout, "hostpath") || strings.Count(out.Stdout, "1/1") != 2 {
		t.Errorf("plugin status:\n%s", out.Stdout)
	}

	// The controller validates at register: an external ID the driver
	// never made is refused, naming the volume and the driver's reason.
	bad := a.CLI("volume", "register", harness.WriteFile(t, "unknown.hcl", fmt.Sprintf(hostpathVolume, "e2e-nosuch")))
	if bad.Code == 0 || !strings.Contains(bad.Stdout+bad.Stderr, `volume "e2e-data"`) ||
		!strings.Contains(bad.Stdout+bad.Stderr, "does not exist") {
		t.Fatalf("register of a volume unknown to the driver: %s", bad)
	}
	if status, _ := a.Do("GET", "/v1/volume/csi/e2e-data", nil, nil); status != 404 {
		t.Fatalf("the refused volume answers %d", status)
	}
	// One the driver made (deregistering keeps it in the driver) is
	// confirmed and registered.
	a.MustCLI("volume", "create", harness.WriteFile(t, "src.hcl", hostpathSourceVolume))
	var src struct{ ExternalID string }
	if status, err := a.Do("GET", "/v1/volume/csi/e2e-src", nil, &src); err != nil || status != 200 || src.ExternalID == "" {
		t.Fatalf("created volume: %d %v %+v", status, err, src)
	}
	a.MustCLI("volume", "deregister", "e2e-src")
	a.MustCLI("volume", "register", harness.WriteFile(t, "vol.hcl", fmt.Sprintf(hostpathVolume, src.ExternalID)))
	st := a.MustCLI("volume", "status", "e2e-data")
	for _, want := range []string{"Schedulable          = true", "Plugin ID            = hostpath", "Nodes Healthy        = 1"} {
		if !strings.Contains(st.Stdout, want) {
			t.Errorf("volume status lacks %q:\n%s", want, st.Stdout)
		}
	}
	if raw := a.MustCLI("volume", "status", "-json", "e2e-data"); strings.Contains(raw.Stdout, "s3cr3t") || !strings.Contains(raw.Stdout, "[REDACTED]") {
		t.Errorf("volume JSON shows its secret:\n%s", raw.Stdout)
	}
	// An update to a capability the driver cannot serve is refused with
	// 400 and the driver's reason, and the volume stays as it was.
	update := map[string]any{"Volumes": []map[string]any{{
		"ID": "e2e-data", "Name": "e2e-data", "PluginID": "hostpath", "ExternalID": src.ExternalID,
		"RequestedCapabilities": []map[string]string{{"AccessMode": "single-node-writer", "AttachmentMode": "block-device"}},
	}}}
	status, body, err := a.Raw("PUT", "/v1/volume/csi/e2e-data", update)
	if err != nil || status != 400 || !strings.Contains(string(body), "block access type is not supported") {
		t.Errorf("block-device update: %d %v %s", status, err, body)
	}
	var kept struct {
		RequestedCapabilities []struct{ AttachmentMode string }
	}
	if status, err := a.Do("GET", "/v1/volume/csi/e2e-data", nil, &kept); err != nil || status != 200 ||
		len(kept.RequestedCapabilities) != 1 || kept.RequestedCapabilities[0].AttachmentMode != "file-system" {
		t.Errorf("after the refused update: %d %v %+v", status, err, kept)
	}
	a.MustCLI("volume", "deregister", "e2e-data")

	a.MustCLI("job", "stop", "-purge", "hostpath-plugin")
	harness.WaitFor(t, waitTimeout, "the plugin to go", func() (bool, string) {
		status, err := a.Do("GET", "/v1/plugin/csi/hostpath", nil, &p)
		return status == 404, fmt.Sprintf("%d %v %+v", status, err, p)
	})
	// The driver process left with its task.
	if procs := harness.ProcsOf(bin); len(procs) != 0 {
		harness.WaitFor(t, waitTimeout, "the driver to exit", func() (bool, string) {
			left := harness.StillAlive(procs)
			return len(left) == 0, fmt.Sprint(left)
		})
	}
	_ = os.Remove(bin)
}

const hostpathCreateVolume = `id        = "e2e-vol"
name      = "e2e-vol"
type      = "csi"
plugin_id = "hostpath"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "single-node-reader-only"
  attachment_mode = "file-system"
}
`

// volumeJob is a sysbatch job whose one task runs script with the volume
// mounted at <task dir>/data.
const volumeJob = `job %q {
  type        = "sysbatch"
  datacenters = ["*"]

  group "g" {
    volume "data" {
      type            = "csi"
      source          = "e2e-vol"
      access_mode     = %q
      attachment_mode = "file-system"
      read_only       = %t
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", %q]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
        read_only   = %t
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
`

// A volume created through the hostpath controller is claimed by a writer
// job (controller publish, node stage and publish, bind mount into the
// task), released when the job's task ends (every claim freed), and then
// read by a second job that finds the writer's file; the volume is then
// deleted through the controller.
func TestCSIVolumeClaimOnDevAgent(t *testing.T) {
	t.Parallel()
	bin := harness.BuiltCopy(t, "./examples/csi/hostpath", "drover-csi-hostpath")
	a := startAgent(t)
	a.MustCLI("job", "run", harness.WriteFile(t, "plugin.hcl", fmt.Sprintf(hostpathPluginJob, bin)))
	harness.WaitFor(t, waitTimeout, "the hostpath plugin to be healthy", func() (bool, string) {
		var p struct{ ControllersHealthy, NodesHealthy int }
		status, err := a.Do("GET", "/v1/plugin/csi/hostpath", nil, &p)
		return err == nil && status == 200 && p.NodesHealthy == 1 && p.ControllersHealthy == 1, fmt.Sprintf("%d %v %+v", status, err, p)
	})
	out := a.MustCLI("volume", "create", harness.WriteFile(t, "vol.hcl", hostpathCreateVolume))
	if !strings.Contains(out.Stdout, "Created external volume") {
		t.Fatalf("volume create:\n%s", out.Stdout)
	}

	type volume struct {
		ExternalID              string
		ReadAllocs, WriteAllocs map[string]any
		PastClaims              map[string]any
		AccessMode, Schedulable any
	}
	claimsFreed := func() (bool, string) {
		var v volume
		status, err := a.Do("GET", "/v1/volume/csi/e2e-vol", nil, &v)
		return err == nil && status == 200 && len(v.ReadAllocs)+len(v.WriteAllocs)+len(v.PastClaims) == 0,
			fmt.Sprintf("%d %v %+v", status, err, v)
	}
	allocDone := func(job string) string {
		var status string
		harness.WaitFor(t, waitTimeout, job+"'s alloc to finish", func() (bool, string) {
			var allocs []struct{ ClientStatus string }
			code, err := a.Do("GET", "/v1/job/"+job+"/allocations", nil, &allocs)
			if err != nil || code != 200 || len(allocs) != 1 {
				return false, fmt.Sprintf("%d %v %+v", code, err, allocs)
			}
			status = allocs[0].ClientStatus
			return status == "complete" || status == "failed", status
		})
		return status
	}

	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "writer.hcl", fmt.Sprintf(volumeJob, "writer", "single-node-writer", false,
		`echo hello-from-writer > "${NOMAD_TASK_DIR}/../data/hello.txt"`, false)))
	if st := allocDone("writer"); st != "complete" {
		t.Fatalf("writer alloc %s", st)
	}
	harness.WaitFor(t, waitTimeout, "the writer's claim to be freed", claimsFreed)

	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "reader.hcl", fmt.Sprintf(volumeJob, "reader", "single-node-reader-only", true,
		`grep -q hello-from-writer "${NOMAD_TASK_DIR}/../data/hello.txt" && ! touch "${NOMAD_TASK_DIR}/../data/other"`, true)))
	if st := allocDone("reader"); st != "complete" {
		t.Fatalf("reader alloc %s: the file was not there, or the read-only mount was writable", st)
	}
	harness.WaitFor(t, waitTimeout, "the reader's claim to be freed", claimsFreed)

	a.MustCLI("volume", "delete", "e2e-vol")
	if status, _ := a.Do("GET", "/v1/volume/csi/e2e-vol", nil, nil); status != 404 {
		t.Errorf("deleted volume answers %d", status)
	}
	a.MustCLI("job", "stop", "-purge", "hostpath-plugin")
}

// The CSI walk-through of examples/csi runs as its files are written: the
// hostpath plugin job (its binary and state dir given by -var), the
// scratch volume created through its controller, and a batch job that
// writes into the volume and lists it; the claim is freed once it ends.
func TestCSIExamplesOnDevAgent(t *testing.T) {
	t.Parallel()
	bin := harness.BuiltCopy(t, "./examples/csi/hostpath", "drover-csi-hostpath")
	example := func(name string) string { return filepath.Join(repoRoot, "examples", "csi", name) }
	a := startAgent(t)
	a.MustCLI("job", "run", "-var", "driver="+bin, "-var", "state_dir="+t.TempDir(), example("hostpath-plugin.hcl"))
	harness.WaitFor(t, waitTimeout, "the hostpath plugin to be healthy", func() (bool, string) {
		var p struct{ ControllersHealthy, NodesHealthy int }
		status, err := a.Do("GET", "/v1/plugin/csi/hostpath", nil, &p)
		return err == nil && status == 200 && p.NodesHealthy == 1 && p.ControllersHealthy == 1, fmt.Sprintf("%d %v %+v", status, err, p)
	})
	if out := a.MustCLI("volume", "create", example("scratch-volume.hcl")); !strings.Contains(out.Stdout, "Created external volume") {
		t.Fatalf("volume create:\n%s", out.Stdout)
	}
	a.MustCLI("job", "run", "-detach", example("scratch-writer.hcl"))
	var allocID string
	harness.WaitFor(t, waitTimeout, "the writer's alloc to complete", func() (bool, string) {
		var allocs []struct{ ID, ClientStatus string }
		code, err := a.Do("GET", "/v1/job/scratch-writer/allocations", nil, &allocs)
		if err != nil || code != 200 || len(allocs) != 1 {
			return false, fmt.Sprintf("%d %v %+v", code, err, allocs)
		}
		allocID = allocs[0].ID
		return allocs[0].ClientStatus == "complete", allocs[0].ClientStatus
	})
	if logs := a.MustCLI("alloc", "logs", allocID, "write"); !strings.Contains(logs.Stdout, "written-by-"+allocID) {
		t.Errorf("the writer's listing of the volume lacks its file:\n%s", logs.Stdout)
	}
	harness.WaitFor(t, waitTimeout, "the writer's claim to be freed", func() (bool, string) {
		var v struct{ ReadAllocs, WriteAllocs, PastClaims map[string]any }
		status, err := a.Do("GET", "/v1/volume/csi/scratch", nil, &v)
		return err == nil && status == 200 && len(v.ReadAllocs)+len(v.WriteAllocs)+len(v.PastClaims) == 0, fmt.Sprintf("%d %v %+v", status, err, v)
	})
	a.MustCLI("volume", "delete", "scratch")
	a.MustCLI("job", "stop", "-purge", "csi-hostpath")
}

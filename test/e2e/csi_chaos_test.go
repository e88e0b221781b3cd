package e2e

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/drover-org/drover/test/internal/harness"
)

// restartingPluginJob is hostpathPluginJob restarted 5 s after its driver
// dies: long enough for a release to find it gone.
var restartingPluginJob = strings.Replace(hostpathPluginJob, `  group "nodes" {
`, `  group "nodes" {
    restart {
      attempts = 5
      interval = "5m"
      delay    = "5s"
      mode     = "fail"
    }

`, 1)

// holderSetup builds the hostpath driver, starts a dev agent running it as
// restartingPluginJob, creates e2e-vol and runs the holder job, which
// writes a file through its mount and keeps running. It returns the agent,
// the driver binary, the holder's alloc ID and a check that the plugin is
// healthy.
func holderSetup(t *testing.T) (a *testAgent, bin, allocID string, healthy func() (bool, string)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the hostpath driver's mounts need root")
	}
	bin = harness.BuiltCopy(t, "./examples/csi/hostpath", "drover-csi-hostpath")
	a = startAgent(t)
	a.MustCLI("job", "run", harness.WriteFile(t, "plugin.hcl", fmt.Sprintf(restartingPluginJob, bin)))
	healthy = func() (bool, string) {
		var p struct{ ControllersHealthy, NodesHealthy int }
		status, err := a.Do("GET", "/v1/plugin/csi/hostpath", nil, &p)
		return err == nil && status == 200 && p.NodesHealthy == 1 && p.ControllersHealthy == 1, fmt.Sprintf("%d %v %+v", status, err, p)
	}
	harness.WaitFor(t, waitTimeout, "the hostpath plugin to be healthy", healthy)
	a.MustCLI("volume", "create", harness.WriteFile(t, "vol.hcl", hostpathCreateVolume))

	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "holder.hcl", fmt.Sprintf(volumeJob, "holder", "single-node-writer", false,
		`echo held > "${NOMAD_TASK_DIR}/../data/held.txt" && exec sleep 3600`, false)))
	harness.WaitFor(t, waitTimeout, "the holder running with its file written", func() (bool, string) {
		var allocs []struct{ ID, ClientStatus string }
		code, err := a.Do("GET", "/v1/job/holder/allocations", nil, &allocs)
		if err != nil || code != 200 || len(allocs) != 1 || allocs[0].ClientStatus != "running" {
			return false, fmt.Sprintf("%d %v %+v", code, err, allocs)
		}
		allocID = allocs[0].ID
		return len(mountsUnder(t, allocID)) > 0, "no mount of the alloc yet"
	})
	return a, bin, allocID, healthy
}

// holderReleased waits until e2e-vol holds no claim and nothing of the
// holder's alloc is mounted.
func holderReleased(t *testing.T, a *testAgent, allocID string) {
	t.Helper()
	harness.WaitFor(t, waitTimeout, "the holder's claim freed", func() (bool, string) {
		var v struct{ ReadAllocs, WriteAllocs, PastClaims map[string]any }
		status, err := a.Do("GET", "/v1/volume/csi/e2e-vol", nil, &v)
		return err == nil && status == 200 && len(v.ReadAllocs)+len(v.WriteAllocs)+len(v.PastClaims) == 0,
			fmt.Sprintf("%d %v %+v", status, err, v)
	})
	harness.WaitFor(t, waitTimeout, "the holder's mounts gone", func() (bool, string) {
		left := mountsUnder(t, allocID)
		return len(left) == 0, fmt.Sprint(left)
	})
}

// The node plugin is killed while a task has its volume mounted, and the
// task is stopped while the plugin is gone: the client unmounts the task's
// bind mount, cannot unpublish, and retries in the background; once the
// plugin job has restarted the driver, the release completes through it
// and the claim is freed. No mount of the volume is left behind.
func TestCSINodePluginKilledDuringRelease(t *testing.T) {
	t.Parallel()
	a, bin, allocID, healthy := holderSetup(t)

	drivers := harness.ProcsOf(bin)
	if len(drivers) != 1 {
		t.Fatalf("hostpath driver processes: %v", drivers)
	}
	if err := syscall.Kill(drivers[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, waitTimeout, "the killed driver gone", func() (bool, string) {
		left := harness.StillAlive(drivers)
		return len(left) == 0, fmt.Sprint(left)
	})
	a.MustCLI("job", "stop", "holder")

	// The plugin comes back (its task restarts) and the release finishes.
	harness.WaitFor(t, waitTimeout, "the plugin healthy again", healthy)
	holderReleased(t, a, allocID)
	// The release did meet the dead plugin, and was retried.
	failed := false
	for _, line := range strings.Split(a.log(), "\n") {
		if strings.Contains(line, "failed to release volume claim") && strings.Contains(line, allocID) {
			failed = true
		}
	}
	if !failed {
		t.Errorf("no failed release of %s was logged: the plugin was back before the job stopped", allocID)
	}
	if ds := harness.ProcsOf(bin); len(ds) != 1 || ds[0].PID == drivers[0].PID {
		t.Errorf("driver processes after the restart: %v (killed %d)", ds, drivers[0].PID)
	}
	a.MustCLI("volume", "delete", "e2e-vol")
	a.MustCLI("job", "stop", "-purge", "hostpath-plugin")
}

// mountsUnder lists the mount points whose path names the allocation: its
// task's bind mount and the node plugin's per-alloc publish target.
func mountsUnder(t *testing.T, allocID string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], allocID) {
			out = append(out, f[4])
		}
	}
	return out
}

// The csi-bridge plugin is replaced (PUT /v1/agent/plugins/reload) while a
// task has a volume mounted: the mount and the task stay, the plugin stays
// healthy through the new bridge, and the task's later release
// unpublishes through it.
func TestCSIBridgeReloadKeepsMounts(t *testing.T) {
	t.Parallel()
	a, _, allocID, healthy := holderSetup(t)
	old, ok := harness.ChildPlugin(a.PID(), "csi-bridge")
	if !ok {
		t.Fatal("the agent's csi-bridge plugin not found")
	}
	mounts := mountsUnder(t, allocID)
	a.MustWrite(http.MethodPut, "/v1/agent/plugins/reload?name=csi-bridge", nil, nil)
	harness.WaitFor(t, waitTimeout, "a new csi-bridge process", func() (bool, string) {
		p, ok := harness.ChildPlugin(a.PID(), "csi-bridge")
		return ok && p.PID != old.PID && !old.Alive(), fmt.Sprintf("old %d alive %v, now %+v", old.PID, old.Alive(), p)
	})
	if now := mountsUnder(t, allocID); !slices.Equal(now, mounts) {
		t.Fatalf("mounts after the reload: %v, before: %v", now, mounts)
	}
	var allocs []struct{ ID, ClientStatus string }
	a.MustGet("/v1/job/holder/allocations", &allocs)
	if len(allocs) != 1 || allocs[0].ID != allocID || allocs[0].ClientStatus != "running" {
		t.Fatalf("holder allocs after the reload: %+v", allocs)
	}
	harness.WaitFor(t, waitTimeout, "the plugin healthy through the new bridge", healthy)

	a.MustCLI("job", "stop", "holder")
	holderReleased(t, a, allocID)
	a.MustCLI("volume", "delete", "e2e-vol")
	a.MustCLI("job", "stop", "-purge", "hostpath-plugin")
}

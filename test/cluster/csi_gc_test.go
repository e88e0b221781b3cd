package cluster

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// CSI garbage collection end to end (docs/csi.md "Garbage collection").
// Test names stay short: the node plugin's socket lives under the test's
// temp dir, which is named after the test, and a unix socket path has at
// most 107 bytes.

// A client's machine is lost while a service allocation on it holds the
// single-node-writer claim of a volume, and the job is stopped and purged
// before the node is seen down: the server stops the allocation, but its
// client will never report it ended. Once the node is down, the stranded
// stop is evaluated and the allocation marked lost, which hands its claim
// to the volume watcher: the claim is freed without the node. `drover
// system gc` then collects the lost allocation and the down node, and the
// volume is claimed again by a new job on the other node, which writes
// through it. (Before the fix in nodeEvals, no eval ever ran for such an
// allocation: it stayed "running" on a down node, and its claim stayed for
// good, through system gc too, since neither the watcher nor claim GC
// frees the claim of an allocation that is not terminal.)
func TestCSIStrandedClaimFreed(t *testing.T) {
	const vol = "stray"
	e := newCSIEnv(t)
	e.register(vol, csiSingleNodeVolumeSpec)
	holder := e.run("holder", "service", e.nodeA, vol, "single-node-writer", false, `exec sleep 3600`, "running")
	e.waitVolume(vol, "the holder's write claim", func(v csiVolumeState) bool {
		_, w := v.WriteAllocs[holder.ID]
		return w && len(v.WriteAllocs) == 1
	})

	e.c.clients[0].crash()
	e.l.MustCLI("job", "stop", "-purge", "-detach", "holder")
	harness.WaitFor(t, waitTimeout, "the holder stopped by the server and purged", func() (bool, string) {
		var al harness.Alloc
		e.l.MustGet("/v1/allocation/"+holder.ID, &al)
		status, err := e.l.DoRetry(http.MethodGet, "/v1/job/holder", nil, nil)
		return al.DesiredStatus == "stop" && status == http.StatusNotFound,
			fmt.Sprintf("alloc desired %s client %s; job %d %v", al.DesiredStatus, al.ClientStatus, status, err)
	})
	// The claim is held while the node is not known down: its client could
	// still be running the task.
	if v, err := e.volume(vol); err != nil || !v.holds(holder.ID) {
		t.Fatalf("the holder's claim before its node is down: %s %v; want it held", v, err)
	}
	harness.WaitFor(t, waitTimeout, "the lost node down", func() (bool, string) {
		var n harness.Node
		e.l.MustGet("/v1/node/"+e.nodeA, &n)
		return n.Status == "down", n.Status
	})
	harness.WaitFor(t, waitTimeout, "the stopped allocation on the down node marked lost", func() (bool, string) {
		var al harness.Alloc
		e.l.MustGet("/v1/allocation/"+holder.ID, &al)
		return al.ClientStatus == "lost", fmt.Sprintf("desired %s, client %s", al.DesiredStatus, al.ClientStatus)
	})
	freed := e.waitClaimFreed(vol, holder.ID, "after its allocation was marked lost")
	t.Logf("the stranded claim freed %s after its allocation was seen lost", freed.Round(1e6))

	// GC collects what the lost machine left: the lost allocation and the
	// down node (no allocation left on it that is not terminal).
	e.l.MustCLI("system", "gc")
	for _, path := range []string{"/v1/allocation/" + holder.ID, "/v1/node/" + e.nodeA} {
		harness.WaitFor(t, waitTimeout, path+" collected by system gc", func() (bool, string) {
			status, err := e.l.DoRetry(http.MethodGet, path, nil, nil)
			return err == nil && status == http.StatusNotFound, fmt.Sprintf("%d %v", status, err)
		})
	}
	// (The lost machine's mounts stay until it returns: only the claims
	// are checked.)
	free := func(v csiVolumeState) bool { return v.free() && v.AccessMode == "" }
	e.waitVolume(vol, "no claim of "+vol+" after system gc", free)

	succ := e.run("successor", "service", e.nodeB, vol, "single-node-writer", false,
		fmt.Sprintf(`echo successor > %s/owner && exec sleep 3600`, csiData), "running")
	e.waitVolume(vol, "the successor's write claim", func(v csiVolumeState) bool {
		_, w := v.WriteAllocs[succ.ID]
		return w && len(v.WriteAllocs) == 1 && len(v.ReadAllocs)+len(v.PastClaims) == 0
	})
	harness.WaitFor(t, waitTimeout, "the successor's write through the volume", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(e.volumes, vol, "owner"))
		return err == nil && strings.TrimSpace(string(b)) == "successor", fmt.Sprintf("%q %v", b, err)
	})
	e.stopPurge("successor")
	e.waitVolume(vol, "no claim of "+vol+" after the successor was stopped", free)
}

// The periodic plugin GC (csi-plugin-gc, every job_gc_interval, here 1 s,
// with csi_plugin_gc_threshold at 1 s) deletes a CSI plugin once nothing
// uses it. The plugin's job is stopped and purged while a volume is
// registered against it: its instances go with their allocations, but the
// state keeps the empty plugin for the volume (a forced `drover system gc`
// keeps it too). The volume is deregistered, which leaves the plugin in
// place: nothing but plugin GC deletes it now, and the periodic job does,
// unasked: GET /v1/plugin/csi/hostpath answers 404 on every server, and
// `drover plugin status` lists no plugin.
func TestCSIPluginGCUnused(t *testing.T) {
	const vol = "named"
	e := newCSIEnvWith(t, options{serverExtra: `  job_gc_interval         = "1s"
  csi_plugin_gc_threshold = "1s"
`}, vol)
	if out := e.l.MustCLI("plugin", "status"); !strings.Contains(out.Stdout, "hostpath") {
		t.Fatalf("plugin status while the plugin runs: %s; want hostpath listed", out)
	}

	e.stopPurge("hostpath-nodes")
	harness.WaitFor(t, waitTimeout, "no instance of the hostpath plugin left", func() (bool, string) {
		var p struct {
			Nodes, Controllers map[string]any
		}
		status, err := e.l.DoRetry(http.MethodGet, "/v1/plugin/csi/hostpath", nil, &p)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		return len(p.Nodes)+len(p.Controllers) == 0, fmt.Sprintf("%+v", p)
	})
	e.l.MustCLI("system", "gc")
	if status, err := e.l.DoRetry(http.MethodGet, "/v1/plugin/csi/hostpath", nil, nil); err != nil || status != http.StatusOK {
		t.Fatalf("the empty plugin after system gc, while volume %s names it: %d %v; want it kept", vol, status, err)
	}

	e.l.MustCLI("volume", "deregister", vol)
	start := time.Now()
	for _, s := range e.c.runningServers() {
		harness.WaitFor(t, waitTimeout, "the unused hostpath plugin deleted by the periodic GC, on "+s.Name, func() (bool, string) {
			status, body, err := s.RawRetry(http.MethodGet, "/v1/plugin/csi/hostpath?stale", nil)
			return err == nil && status == http.StatusNotFound, fmt.Sprintf("%d %v %s", status, err, body)
		})
	}
	t.Logf("the plugin deleted on every server %s after the volume was deregistered", time.Since(start).Round(time.Millisecond))
	out := e.l.MustCLI("plugin", "status")
	if strings.Contains(out.Stdout, "hostpath") || !strings.Contains(out.Stdout, "No CSI plugins") {
		t.Errorf("plugin status after the plugin GC: %s; want no plugin listed", out)
	}
}

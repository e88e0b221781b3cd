package cluster

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// Chaos around CSI claims on the cluster: a client's machine lost while
// one of its allocations holds a single-node-writer claim, and the leader
// lost while claims are taken and released. (The node plugin killed during
// a release is test/e2e/csi_chaos_test.go's, on the dev agent.)

// csiSingleNodeVolumeSpec registers an existing directory of the shared
// volumes dir as a single-node-writer volume (see csiVolumeSpec).
const csiSingleNodeVolumeSpec = `id          = %q
name        = %q
type        = "csi"
plugin_id   = "hostpath"
external_id = %q

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
`

// claimFreedBound bounds the time from the moment the leader can know a
// claim is over (its allocation lost, or the job stopped) until the claim
// is freed: the volume watcher's first passes (a retry after 1 s, then
// 2 s) and a client's release retries (1 s, 2 s, …), with room for a
// loaded machine. A claim that waits for a later, unrelated write of its
// volume, or for the next leader, does not make it.
const claimFreedBound = 20 * time.Second

// claimWatch samples the claims of single-node volumes through every
// server, each from its own state (?stale), and, with mounts, the CSI
// mounts on every client: it records every sample in which one volume was
// claimed by allocations on two nodes, or mounted by the node plugins of
// two clients. It is a check over the whole test, not a synchronisation.
type claimWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	mu         sync.Mutex
	samples    int
	claimed    map[string]map[string]bool // volume → nodes that held a claim in some sample
	violations []string
}

// watchClaims starts sampling vols. With mounts, a CSI mount of a volume
// under two clients' data dirs at once is a violation too (only where no
// client is lost: a lost machine's mounts stay until it returns).
func watchClaims(e *csiEnv, vols []string, mounts bool) *claimWatch {
	w := &claimWatch{done: make(chan struct{}), claimed: map[string]map[string]bool{}}
	// The agents are restarted and crashed by the test meanwhile: the
	// watch reads only their addresses, which never change.
	var apis []*harness.API
	for _, s := range e.c.servers {
		apis = append(apis, harness.NewAPI(e.t, s.Addr, droverBin, repoRoot))
	}
	clientDirs := map[string]string{e.nodeA: e.c.clients[0].DataDir, e.nodeB: e.c.clients[1].DataDir}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			for _, a := range apis {
				a.HTTP.CloseIdleConnections()
			}
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, a := range apis {
				for _, id := range vols {
					w.sampleClaims(a, id)
				}
			}
			if mounts {
				w.sampleMounts(e.t, vols, clientDirs)
			}
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// volumeClaims is what the watch reads of GET /v1/volume/csi/:id: the
// claiming allocations, each with its node.
type volumeClaims struct {
	AccessMode              string
	ReadAllocs, WriteAllocs map[string]*struct{ NodeID string }
}

func (w *claimWatch) sampleClaims(a *harness.API, id string) {
	var v volumeClaims
	// A server that is down, or has no leader yet, answers nothing: the
	// others are sampled all the same.
	if status, err := a.Do(http.MethodGet, "/v1/volume/csi/"+id+"?stale", nil, &v); err != nil || status != http.StatusOK {
		return
	}
	nodes := map[string][]string{}
	for kind, m := range map[string]map[string]*struct{ NodeID string }{"read": v.ReadAllocs, "write": v.WriteAllocs} {
		for alloc, al := range m {
			node := "?"
			if al != nil {
				node = al.NodeID
			}
			nodes[node] = append(nodes[node], kind+":"+shortID(alloc))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if w.claimed[id] == nil {
		w.claimed[id] = map[string]bool{}
	}
	for n := range nodes {
		w.claimed[id][n] = true
	}
	if len(nodes) > 1 {
		w.violations = append(w.violations, fmt.Sprintf("%s on %s (mode %q): claims on %d nodes at once: %v",
			id, a.Addr, v.AccessMode, len(nodes), nodes))
	}
}

// sampleMounts looks for a staging or publish mount of one volume under
// two clients at once.
func (w *claimWatch) sampleMounts(t *testing.T, vols []string, clientDirs map[string]string) {
	at := map[string][]string{} // volume → nodes with a CSI mount of it
	for node, dir := range clientDirs {
		seen := map[string]bool{}
		for _, m := range mountsUnder(t, dir) {
			if v := csiMountVolume(m); v != "" && !seen[v] {
				seen[v] = true
				at[v] = append(at[v], shortID(node))
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range vols {
		if len(at[v]) > 1 {
			sort.Strings(at[v])
			w.violations = append(w.violations, fmt.Sprintf("%s mounted by the node plugins of %v at once", v, at[v]))
		}
	}
}

// csiMountVolume is the volume of a CSI staging mount
// (…/csi/node/<plugin>/staging/<ns>/<volume>/<usage>) or publish mount
// (…/csi/node/<plugin>/per-alloc/<alloc>/<volume>/<usage>), or "".
func csiMountVolume(path string) string {
	parts := strings.Split(filepath.ToSlash(path), "/")
	for i := 0; i+5 < len(parts); i++ {
		if parts[i] == "csi" && parts[i+1] == "node" && (parts[i+3] == "staging" || parts[i+3] == "per-alloc") {
			return parts[i+5]
		}
	}
	return ""
}

// stop ends the watch; it fails the test for every violation seen and
// returns the number of samples taken.
func (w *claimWatch) stop(t *testing.T) int {
	t.Helper()
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	const show = 10
	for i, v := range w.violations {
		if i == show {
			t.Errorf("… and %d more", len(w.violations)-show)
			break
		}
		t.Errorf("single-node volume: %s", v)
	}
	if w.samples == 0 {
		t.Error("the claim watch took no sample")
	}
	return w.samples
}

// nodesClaiming is the nodes that held a claim of the volume in some
// sample.
func (w *claimWatch) nodesClaiming(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.claimed[id])
}

// waitClaimFreed waits, up to claimFreedBound, until alloc holds no claim
// of the volume, and returns how long it took.
func (e *csiEnv) waitClaimFreed(id, alloc, why string) time.Duration {
	e.t.Helper()
	start := time.Now()
	harness.WaitFor(e.t, claimFreedBound, shortID(alloc)+"'s claim of "+id+" freed "+why, func() (bool, string) {
		v, err := e.volume(id)
		if err != nil {
			return false, err.Error()
		}
		return !v.holds(alloc), v.String()
	})
	return time.Since(start)
}

// A client's machine is lost while an allocation on it holds the
// single-node-writer claim of a volume, and a writer job for the volume on
// the other node waits for it. The lost node goes down after the heartbeat
// TTL and grace, its allocation is lost, and the leader's volume watcher
// releases the claim without the client (unpublishing waits for the node
// to be down; a node-only plugin has no controller to detach from). The
// freed claim brings the waiting job an evaluation: it is placed on the
// other node and writes through the volume. Throughout, the volume is
// never claimed from both nodes. The lost client comes back: it releases
// what its dead node plugin had mounted, and no CSI mount is left. Last,
// the CSI plugin reaper: with the plugin job purged, system gc keeps the
// plugin while the volume names it and deletes it once the volume is
// deregistered (gcPluginAfterVolume).
func TestCSIClientLossFreesClaim(t *testing.T) {
	const vol = "lone"
	e := newCSIEnv(t)
	e.register(vol, csiSingleNodeVolumeSpec)
	lost, kept := e.c.clients[0], e.c.clients[1]
	watch := watchClaims(e, []string{vol}, false)
	defer watch.stop(t)

	owner := filepath.Join(e.volumes, vol, "owner")
	holder := e.run("holder", "system", e.nodeA, vol, "single-node-writer", false,
		fmt.Sprintf(`echo holder > %s/owner && exec sleep 3600`, csiData), "running")
	e.waitVolume(vol, "the holder's write claim", func(v csiVolumeState) bool {
		_, w := v.WriteAllocs[holder.ID]
		return w && len(v.WriteAllocs) == 1 && v.AccessMode == "single-node-writer"
	})

	// The successor, on the other node, cannot be placed while the claim
	// is held: its evaluation ends with the group unplaced.
	e.submit("successor", "system", e.nodeB, vol, "single-node-writer", false,
		fmt.Sprintf(`echo successor > %s/owner && exec sleep 3600`, csiData))
	e.waitUnplaced("successor")

	start := time.Now()
	lost.crash()
	harness.WaitFor(t, waitTimeout, "the lost node down", func() (bool, string) {
		var n harness.Node
		e.l.MustGet("/v1/node/"+e.nodeA, &n)
		return n.Status == "down", n.Status
	})
	down := time.Since(start)
	harness.WaitFor(t, waitTimeout, "the holder's allocation lost", func() (bool, string) {
		var al harness.Alloc
		e.l.MustGet("/v1/allocation/"+holder.ID, &al)
		return al.ClientStatus == "lost", fmt.Sprintf("desired %s, client %s", al.DesiredStatus, al.ClientStatus)
	})
	freed := e.waitClaimFreed(vol, holder.ID, "after its allocation was lost")
	t.Logf("node down %s after the crash; the lost allocation's claim freed %s after it was seen lost",
		down.Round(time.Millisecond), freed.Round(time.Millisecond))

	succ := e.waitAlloc("successor", e.nodeB, "running")
	e.waitVolume(vol, "the successor's write claim", func(v csiVolumeState) bool {
		_, w := v.WriteAllocs[succ.ID]
		return w && len(v.WriteAllocs) == 1 && len(v.ReadAllocs) == 0
	})
	harness.WaitFor(t, waitTimeout, "the successor's write through the volume", func() (bool, string) {
		b, err := os.ReadFile(owner)
		return err == nil && strings.TrimSpace(string(b)) == "successor", fmt.Sprintf("%q %v", b, err)
	})

	// The lost machine returns: its client releases what it had mounted
	// for the lost allocation (the claim is freed already), and once the
	// successor is gone too, nothing is left. The holder's job is stopped
	// first, so that it does not come back to the returned node.
	e.l.MustCLI("job", "stop", "-detach", "holder")
	lost.restart()
	e.c.waitNodeReady(lost)
	harness.WaitFor(t, waitTimeout, "no CSI mount left on the returned node", func() (bool, string) {
		var left []string
		for _, m := range mountsUnder(t, lost.DataDir) {
			if csiMountVolume(m) != "" {
				left = append(left, m)
			}
		}
		return len(left) == 0, strings.Join(left, "\n")
	})
	e.stopPurge("successor")
	e.waitFreed(vol, "after the successor was stopped")
	if n := watch.nodesClaiming(vol); n != 2 {
		t.Errorf("the claim watch saw claims of %s from %d nodes over the test; want both, one at a time", vol, n)
	}
	t.Logf("%d samples of the volume's claims; kept client %s", watch.stop(t), kept)

	e.gcPluginAfterVolume(vol)
}

// gcPluginAfterVolume checks the CSI plugin reaper once the test is done
// with the plugin: with its job stopped and purged and no instance left,
// `drover system gc` keeps the plugin while vol still names it (and says
// nothing of it: keeping is no error), and deletes it once vol is
// deregistered.
func (e *csiEnv) gcPluginAfterVolume(vol string) {
	e.t.Helper()
	e.stopPurge("hostpath-nodes")
	harness.WaitFor(e.t, waitTimeout, "no instance of the hostpath plugin left", func() (bool, string) {
		var p struct {
			Nodes, Controllers map[string]any
		}
		status, err := e.l.DoRetry(http.MethodGet, "/v1/plugin/csi/hostpath", nil, &p)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		return len(p.Nodes)+len(p.Controllers) == 0, fmt.Sprintf("%+v", p)
	})
	if out := e.l.MustCLI("system", "gc"); out.Stdout != "" || out.Stderr != "" {
		e.t.Errorf("system gc with a volume naming the plugin printed %s", out)
	}
	if status, err := e.l.DoRetry(http.MethodGet, "/v1/plugin/csi/hostpath", nil, nil); err != nil || status != http.StatusOK {
		e.t.Fatalf("the plugin after system gc, while volume %s names it: %d %v, want it kept", vol, status, err)
	}
	if _, err := e.volume(vol); err != nil {
		e.t.Fatalf("volume %s after system gc: %v", vol, err)
	}

	e.l.MustCLI("volume", "deregister", vol)
	e.l.MustCLI("system", "gc")
	for _, s := range e.c.runningServers() {
		harness.WaitFor(e.t, waitTimeout, "the empty hostpath plugin gone from "+s.Name, func() (bool, string) {
			status, err := s.DoRetry(http.MethodGet, "/v1/plugin/csi/hostpath?stale", nil, nil)
			return err == nil && status == http.StatusNotFound, fmt.Sprintf("%d %v", status, err)
		})
	}
}

// waitUnplaced waits until the job's newest evaluation is complete with a
// group it could not place.
func (e *csiEnv) waitUnplaced(id string) {
	e.t.Helper()
	harness.WaitFor(e.t, waitTimeout, id+"'s evaluation to leave it unplaced", func() (bool, string) {
		var evals []struct {
			ID, Status     string
			CreateIndex    uint64
			FailedTGAllocs map[string]any
		}
		status, err := e.l.DoRetry(http.MethodGet, "/v1/job/"+id+"/evaluations", nil, &evals)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		if len(evals) == 0 {
			return false, "no evaluation"
		}
		sort.Slice(evals, func(i, j int) bool { return evals[i].CreateIndex > evals[j].CreateIndex })
		last := evals[0]
		return last.Status == "complete" && len(last.FailedTGAllocs) > 0, fmt.Sprintf("%+v", last)
	})
	byNode, err := allocsByNode(e.l, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(byNode) != 0 {
		e.t.Fatalf("%s was placed while the volume's claim was held: %s", id, describeAllocs(byNode))
	}
}

// The leader's machine dies while sysbatch jobs take and release the
// single-node-writer claims of three volumes. Each volume is asked for by
// three jobs at once, on alternating nodes: one holds it, writes and ends,
// its client releases the claim, and the freed claim brings the others an
// evaluation; a claim refused meanwhile is retried by its client. The
// leader is killed once the first claims were taken and released, with
// claims in flight: those fail with "no leader" and their clients retry
// them on the new leader, whose watcher finishes the releases. Every job
// runs once, writing through its volume; once all of them are stopped,
// every claim of every volume is freed within claimFreedBound and no
// mount is left. Throughout, no volume is claimed from, or mounted on, two
// nodes at once, in any server's state.
func TestCSILeaderLossDuringClaims(t *testing.T) {
	const perVolume = 3
	vols := []string{"v0", "v1", "v2"}
	e := newCSIEnv(t)
	for _, v := range vols {
		e.register(v, csiSingleNodeVolumeSpec)
	}
	watch := watchClaims(e, vols, true)
	defer watch.stop(t)

	type job struct{ id, vol, node string }
	var jobs []job
	for i, v := range vols {
		for r := range perVolume {
			node := e.nodeA
			if (i+r)%2 == 1 {
				node = e.nodeB
			}
			jobs = append(jobs, job{fmt.Sprintf("w-%s-%d", v, r), v, node})
		}
	}
	// Each writer appends its name to the volume's log, holds the claim
	// a moment, and ends.
	for _, j := range jobs {
		e.submit(j.id, "sysbatch", j.node, j.vol, "single-node-writer", false,
			fmt.Sprintf(`echo %s >> %s/log && sleep 1`, j.id, csiData))
	}

	// Kill the leader once some writer has ended (a release is under way
	// or done) while others still wait for their claims.
	complete := func() (map[string]harness.Alloc, string) {
		done := map[string]harness.Alloc{}
		var seen []string
		for _, j := range jobs {
			byNode, err := allocsByNode(e.l, j.id)
			if err != nil {
				return nil, err.Error()
			}
			for _, al := range byNode[j.node] {
				if al.ClientStatus == "failed" {
					t.Fatalf("%s: alloc %s failed: %s", j.id, shortID(al.ID), e.taskEvents(al.ID))
				}
				if al.ClientStatus == "complete" {
					done[j.id] = al
				}
			}
			if len(byNode) > 1 || len(byNode[j.node]) > 1 {
				t.Fatalf("%s: allocations %s; want one, on its node %s", j.id, describeAllocs(byNode), shortID(j.node))
			}
			seen = append(seen, fmt.Sprintf("%s:%s", j.id, describeAllocs(byNode)))
		}
		return done, strings.Join(seen, " ")
	}
	harness.WaitFor(t, waitTimeout, "a first writer complete", func() (bool, string) {
		done, seen := complete()
		return len(done) > 0, seen
	})
	old := e.l
	_, before := complete()
	start := time.Now()
	old.crash()
	e.l = e.c.leader()
	t.Logf("%s crashed; %s leads after %s; jobs at the crash: %s", old, e.l, time.Since(start).Round(time.Millisecond), before)

	var done map[string]harness.Alloc
	harness.WaitFor(t, 2*waitTimeout, "every writer complete", func() (bool, string) {
		var seen string
		done, seen = complete()
		return len(done) == len(jobs), seen
	})
	t.Logf("every writer complete %s after the crash", time.Since(start).Round(time.Millisecond))

	for _, v := range vols {
		b, err := os.ReadFile(filepath.Join(e.volumes, v, "log"))
		if err != nil {
			t.Fatal(err)
		}
		lines := harness.Lines(string(b))
		sort.Strings(lines)
		var want []string
		for _, j := range jobs {
			if j.vol == v {
				want = append(want, j.id)
			}
		}
		if strings.Join(lines, " ") != strings.Join(want, " ") {
			t.Errorf("%s's log: %v; want each of its writers once: %v", v, lines, want)
		}
	}

	stopped := time.Now()
	for _, j := range jobs {
		e.l.MustCLI("job", "stop", "-purge", "-detach", j.id)
	}
	for _, v := range vols {
		e.waitVolume(v, "every claim of "+v+" freed after the writers were stopped", func(s csiVolumeState) bool {
			if time.Since(stopped) > claimFreedBound {
				t.Fatalf("%s still claimed %s after the writers were stopped: %s", v, claimFreedBound, s)
			}
			return s.free() && s.AccessMode == ""
		})
	}
	t.Logf("every claim freed %s after the writers were stopped", time.Since(stopped).Round(time.Millisecond))
	e.waitNoCSIMounts("after the writers were stopped")
	for _, v := range vols {
		if n := watch.nodesClaiming(v); n != 2 {
			t.Errorf("the claim watch saw claims of %s from %d nodes; want both, one at a time", v, n)
		}
	}
	t.Logf("%d samples of the volumes' claims", watch.stop(t))
}

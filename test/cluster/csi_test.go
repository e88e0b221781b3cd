package cluster

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/test/internal/harness"
)

// csiNodePluginJob runs the repository's hostpath CSI driver on every
// client as a node-only plugin. Each node's driver keeps its own state
// dir but all of them share one volumes dir (-volumes-dir), the stand-in
// for a network file system on one machine: a file one node writes into a
// volume, every other node sees. Arguments: the driver binary, the dir of
// the state dirs, the shared volumes dir.
const csiNodePluginJob = `job "hostpath-nodes" {
  type        = "system"
  datacenters = ["*"]

  group "nodes" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = %q
        args = [
          "-mode", "node",
          "-node-id", "${node.unique.id}",
          "-state-dir", "%s/${node.unique.id}",
          "-volumes-dir", %q,
        ]
      }

      csi_plugin {
        id             = "hostpath"
        type           = "node"
        health_timeout = "1m"
      }

      kill_timeout = "5s"

      resources {
        cpu    = 50
        memory = 64
      }
    }
  }
}
`

// csiVolumeSpec registers an existing volume directory (its external ID)
// of the shared volumes dir: no topology, so every node reaches it.
const csiVolumeSpec = `id          = %q
name        = %q
type        = "csi"
plugin_id   = "hostpath"
external_id = %q

capability {
  access_mode     = "multi-node-single-writer"
  attachment_mode = "file-system"
}

capability {
  access_mode     = "multi-node-reader-only"
  attachment_mode = "file-system"
}
`

// csiVolumeJob is a job of one task on one node (a constraint on the node
// ID) that mounts a CSI volume at <task dir>/../data and runs a shell
// script. Arguments: job ID, type (system or sysbatch), node ID, volume
// ID, access mode, read-only (volume and mount), script.
const csiVolumeJob = `job %q {
  type        = %q
  datacenters = ["*"]

  constraint {
    attribute = "${node.unique.id}"
    value     = %q
  }

  group "g" {
    volume "data" {
      type            = "csi"
      source          = %q
      access_mode     = %q
      attachment_mode = "file-system"
      read_only       = %[6]t
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", %[7]q]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
        read_only   = %[6]t
      }

      kill_timeout = "2s"

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// csiData is the volume's mount point as a raw_exec task sees it.
const csiData = `"${NOMAD_TASK_DIR}/../data"`

// csiVolumeState is what the test reads of GET /v1/volume/csi/:id.
type csiVolumeState struct {
	ID                      string
	Schedulable             bool
	AccessMode              string
	ReadAllocs, WriteAllocs map[string]any
	PastClaims              map[string]any
}

func (v csiVolumeState) String() string {
	return fmt.Sprintf("mode %q, read %v, write %v, past %v", v.AccessMode,
		sortedKeys(v.ReadAllocs), sortedKeys(v.WriteAllocs), sortedKeys(v.PastClaims))
}

func (v csiVolumeState) free() bool {
	return len(v.ReadAllocs)+len(v.WriteAllocs)+len(v.PastClaims) == 0
}

// holds reports whether alloc has any claim (taken or being released).
func (v csiVolumeState) holds(alloc string) bool {
	_, r := v.ReadAllocs[alloc]
	_, w := v.WriteAllocs[alloc]
	_, p := v.PastClaims[alloc]
	return r || w || p
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, shortID(k))
	}
	sort.Strings(out)
	return out
}

// csiEnv is one cluster with the hostpath node plugin healthy on both
// clients and the volumes dir they share.
type csiEnv struct {
	t            *testing.T
	c            *cluster
	l            *agent
	nodeA, nodeB string
	volumes      string // the shared volumes dir
	mounts       string // where every mount of the test is made (the test's temp root)
}

// volume reads a volume through the leader.
func (e *csiEnv) volume(id string) (csiVolumeState, error) {
	var v csiVolumeState
	status, err := e.l.DoRetry(http.MethodGet, "/v1/volume/csi/"+id, nil, &v)
	if err != nil || status != http.StatusOK {
		return v, fmt.Errorf("GET volume %s: %d %v", id, status, err)
	}
	return v, nil
}

// waitVolume waits until cond holds of the volume.
func (e *csiEnv) waitVolume(id, what string, cond func(csiVolumeState) bool) csiVolumeState {
	e.t.Helper()
	var v csiVolumeState
	harness.WaitFor(e.t, waitTimeout, what, func() (bool, string) {
		var err error
		if v, err = e.volume(id); err != nil {
			return false, err.Error()
		}
		return cond(v), v.String()
	})
	return v
}

// waitFreed waits until the volume has no claim at all and its access
// mode is reset (the last claim took it away).
func (e *csiEnv) waitFreed(id, after string) {
	e.t.Helper()
	e.waitVolume(id, "every claim of "+id+" freed "+after, func(v csiVolumeState) bool {
		return v.free() && v.AccessMode == ""
	})
	e.waitNoCSIMounts(after)
}

// waitNoCSIMounts waits until no CSI staging or publish mount is left on
// either client: the node plugin unpublished and unstaged everything.
func (e *csiEnv) waitNoCSIMounts(after string) {
	e.t.Helper()
	harness.WaitFor(e.t, waitTimeout, "no CSI mount left "+after, func() (bool, string) {
		var left []string
		for _, m := range mountsUnder(e.t, e.mounts) {
			if strings.Contains(m, string(filepath.Separator)+"csi"+string(filepath.Separator)) {
				left = append(left, m)
			}
		}
		return len(left) == 0, strings.Join(left, "\n")
	})
}

// run registers a job on one node and returns its only allocation once its
// client status is one of want.
func (e *csiEnv) run(id, typ, node, volume, access string, readOnly bool, script string, want ...string) harness.Alloc {
	e.t.Helper()
	e.submit(id, typ, node, volume, access, readOnly, script)
	return e.waitAlloc(id, node, want...)
}

// submit registers a job of one task on one node (see csiVolumeJob) and
// does not wait.
func (e *csiEnv) submit(id, typ, node, volume, access string, readOnly bool, script string) {
	e.t.Helper()
	e.l.MustCLI("job", "run", "-detach", harness.WriteFile(e.t, id+".hcl",
		fmt.Sprintf(csiVolumeJob, id, typ, node, volume, access, readOnly, script)))
}

// waitAlloc waits until the job has one allocation, on node, whose client
// status is one of want, and returns it. A failed allocation fails the
// test.
func (e *csiEnv) waitAlloc(id, node string, want ...string) harness.Alloc {
	e.t.Helper()
	var al harness.Alloc
	harness.WaitFor(e.t, waitTimeout, id+" "+strings.Join(want, " or ")+" on its node", func() (bool, string) {
		byNode, err := allocsByNode(e.l, id)
		if err != nil {
			return false, err.Error()
		}
		for _, allocs := range byNode {
			for _, a := range allocs {
				if a.ClientStatus == "failed" {
					e.t.Fatalf("%s: alloc %s failed: %s\nall: %s", id, shortID(a.ID), e.taskEvents(a.ID), describeAllocs(byNode))
				}
			}
		}
		all := byNode[node]
		if len(byNode) != 1 || len(all) != 1 {
			return false, describeAllocs(byNode)
		}
		al = all[0]
		return slices.Contains(want, al.ClientStatus), describeAllocs(byNode)
	})
	return al
}

// taskEvents renders the task events of an allocation, for a failure.
func (e *csiEnv) taskEvents(allocID string) string {
	var al struct {
		TaskStates map[string]struct {
			State  string
			Events []struct{ Type, DisplayMessage string }
		}
	}
	if status, err := e.l.DoRetry(http.MethodGet, "/v1/allocation/"+allocID, nil, &al); err != nil || status != http.StatusOK {
		return fmt.Sprintf("GET allocation: %d %v", status, err)
	}
	var b strings.Builder
	for task, ts := range al.TaskStates {
		fmt.Fprintf(&b, "task %s %s:", task, ts.State)
		for _, ev := range ts.Events {
			fmt.Fprintf(&b, " [%s: %s]", ev.Type, ev.DisplayMessage)
		}
	}
	return b.String()
}

// stopPurge stops and purges a job: its allocations go from the state with
// it, so their claims must be released all the same.
func (e *csiEnv) stopPurge(id string) {
	e.t.Helper()
	e.l.MustCLI("job", "stop", "-purge", "-detach", id)
	harness.WaitFor(e.t, waitTimeout, id+" purged", func() (bool, string) {
		status, err := e.l.Do(http.MethodGet, "/v1/job/"+id, nil, nil)
		return status == http.StatusNotFound, fmt.Sprintf("%d %v", status, err)
	})
}

// newCSIEnv builds the hostpath driver, starts a cluster of two clients,
// runs the driver on both as a node plugin and registers the volumes,
// each a directory of the shared volumes dir.
func newCSIEnv(t *testing.T, volumes ...string) *csiEnv {
	t.Helper()
	return newCSIEnvWith(t, options{clients: 2}, volumes...)
}

// newCSIEnvWith is newCSIEnv on a cluster shaped by opts (two clients).
func newCSIEnvWith(t *testing.T, opts options, volumes ...string) *csiEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("CSI volumes are bind mounts: the hostpath node plugin needs root")
	}
	work := t.TempDir()
	// Every mount the test makes is under the test's temp root: if the
	// test fails half-way, take them off after the cluster is down (this
	// cleanup runs after newCluster's teardown), before the temp dirs are
	// removed.
	mounts := filepath.Dir(work)
	t.Cleanup(func() { unmountUnder(t, mounts) })

	bin := harness.BuiltCopy(t, "./examples/csi/hostpath", "drover-csi-hostpath")
	shared := filepath.Join(work, "shared", "volumes")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}

	opts.clients = 2
	c := newCluster(t, opts)
	e := &csiEnv{t: t, c: c, l: c.leader(), nodeA: c.nodeID(c.clients[0]), nodeB: c.nodeID(c.clients[1]),
		volumes: shared, mounts: mounts}
	e.l.MustCLI("job", "run", "-detach", harness.WriteFile(t, "plugin.hcl",
		fmt.Sprintf(csiNodePluginJob, bin, filepath.Join(work, "state"), shared)))
	harness.WaitFor(t, waitTimeout, "the hostpath node plugin healthy on both clients", func() (bool, string) {
		var p struct {
			ControllerRequired               bool
			ControllersHealthy, NodesHealthy int
			Nodes                            map[string]struct{ Healthy bool }
		}
		status, err := e.l.Do(http.MethodGet, "/v1/plugin/csi/hostpath", nil, &p)
		if err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("%d %v", status, err)
		}
		if p.ControllerRequired || p.ControllersHealthy != 0 {
			t.Fatalf("a node-only plugin has controllers: %+v", p)
		}
		return p.NodesHealthy == 2 && p.Nodes[e.nodeA].Healthy && p.Nodes[e.nodeB].Healthy, fmt.Sprintf("%+v", p)
	})
	for _, v := range volumes {
		e.register(v, csiVolumeSpec)
	}
	return e
}

// register makes the volume's directory in the shared volumes dir and
// registers it from spec (csiVolumeSpec or the like: its arguments are the
// volume's ID, name and external ID, all id), then waits until it is
// schedulable and unclaimed.
func (e *csiEnv) register(id, spec string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Join(e.volumes, id), 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.l.MustCLI("volume", "register", harness.WriteFile(e.t, id+"-vol.hcl", fmt.Sprintf(spec, id, id, id)))
	e.waitVolume(id, id+" schedulable and unclaimed", func(s csiVolumeState) bool { return s.Schedulable && s.free() })
}

// The CSI claim cycle across the nodes of a multi-process cluster, with
// the hostpath driver as a node plugin on both clients:
//
//   - a writer job on node A writes a file into a volume, is stopped and
//     purged, and every claim of the volume is freed (mode reset, no
//     mount left);
//   - a read-only job on node B finds the file and cannot write;
//   - on node A, a read-write and a read-only claim of one volume are held
//     at once by two jobs (each with its own staging path), released in
//     either order: the first release frees only its own claim, the second
//     frees the volume.
func TestCSIVolumesAcrossNodes(t *testing.T) {
	const handoff, pair = "handoff", "pair"
	e := newCSIEnv(t, handoff, pair)

	// A writer on node A, then a reader on node B.
	const content = "written-on-node-a"
	writer := e.run("writer", "system", e.nodeA, handoff, "multi-node-single-writer", false,
		fmt.Sprintf(`echo %s > %s/hello.txt && exec sleep 3600`, content, csiData), "running")
	harness.WaitFor(t, waitTimeout, "the writer's file in the shared volume", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(e.volumes, handoff, "hello.txt"))
		return err == nil && strings.TrimSpace(string(b)) == content, fmt.Sprintf("%q %v", b, err)
	})
	e.waitVolume(handoff, "the writer's write claim", func(v csiVolumeState) bool {
		_, w := v.WriteAllocs[writer.ID]
		return w && len(v.WriteAllocs) == 1 && len(v.ReadAllocs) == 0 && v.AccessMode == "multi-node-single-writer"
	})
	e.stopPurge("writer")
	e.waitFreed(handoff, "after the writer was stopped and purged")

	// The reader's script fails (and with it the alloc) unless the file
	// is there and the mount refuses a write.
	reader := e.run("reader", "sysbatch", e.nodeB, handoff, "multi-node-reader-only", true,
		fmt.Sprintf(`grep -qx %s %s/hello.txt && ! touch %s/from-b 2>/dev/null`, content, csiData, csiData), "complete")
	if reader.NodeID != e.nodeB {
		t.Errorf("reader ran on %s, want node B %s", reader.NodeID, e.nodeB)
	}
	e.waitFreed(handoff, "after the reader completed")
	if _, err := os.Stat(filepath.Join(e.volumes, handoff, "from-b")); !os.IsNotExist(err) {
		t.Errorf("the read-only reader wrote into the volume: %v", err)
	}
	e.stopPurge("reader")

	// A reader and a writer of one volume on one node at once, released
	// in either order. The reader's task fails if its mount takes a write.
	writerScript := fmt.Sprintf(`echo rw > %s/rw.txt && exec sleep 3600`, csiData)
	readerScript := fmt.Sprintf(`if touch %s/ro.txt 2>/dev/null; then echo the read-only mount is writable; exit 1; fi; exec sleep 3600`, csiData)
	for i, tc := range []struct {
		name    string
		rwFirst bool
	}{
		{"release rw, then ro", true},
		{"release ro, then rw", false},
	} {
		t.Logf("pair %d: %s", i, tc.name)
		rwJob, roJob := fmt.Sprintf("pair-rw-%d", i), fmt.Sprintf("pair-ro-%d", i)
		rw := e.run(rwJob, "system", e.nodeA, pair, "multi-node-single-writer", false, writerScript, "running")
		ro := e.run(roJob, "system", e.nodeA, pair, "multi-node-single-writer", true, readerScript, "running")
		e.waitVolume(pair, tc.name+": a write and a read claim at once", func(v csiVolumeState) bool {
			_, w := v.WriteAllocs[rw.ID]
			_, r := v.ReadAllocs[ro.ID]
			return w && r && len(v.WriteAllocs) == 1 && len(v.ReadAllocs) == 1 && len(v.PastClaims) == 0 &&
				v.AccessMode == "multi-node-single-writer"
		})
		// The client stages once per usage: the volume is staged twice on
		// node A, read-only and read-write.
		staging := string(filepath.Separator) + filepath.Join("csi", "node", "hostpath", "staging", "default", pair) + string(filepath.Separator)
		harness.WaitFor(t, waitTimeout, tc.name+": the volume staged for both usages", func() (bool, string) {
			var got []string
			for _, m := range mountsUnder(t, e.c.clients[0].DataDir) {
				if strings.Contains(m, staging) {
					got = append(got, filepath.Base(m))
				}
			}
			sort.Strings(got)
			want := []string{"ro-file-system-multi-node-single-writer", "rw-file-system-multi-node-single-writer"}
			return slices.Equal(got, want), fmt.Sprint(got)
		})
		first, second, firstJob, secondJob := rw, ro, rwJob, roJob
		if !tc.rwFirst {
			first, second, firstJob, secondJob = ro, rw, roJob, rwJob
		}
		e.stopPurge(firstJob)
		v := e.waitVolume(pair, tc.name+": "+firstJob+"'s claim freed", func(v csiVolumeState) bool { return !v.holds(first.ID) })
		if !v.holds(second.ID) || v.AccessMode != "multi-node-single-writer" {
			t.Errorf("%s: after %s's release: %s; want %s's claim kept and the mode unchanged", tc.name, firstJob, v, secondJob)
		}
		// The remaining job's task still runs on its mount.
		var al harness.Alloc
		e.l.MustGet("/v1/allocation/"+second.ID, &al)
		if al.ClientStatus != "running" {
			t.Errorf("%s: %s after %s's release: %s", tc.name, secondJob, firstJob, al.ClientStatus)
		}
		e.stopPurge(secondJob)
		e.waitFreed(pair, tc.name+": after both jobs were stopped and purged")
	}
	if b, err := os.ReadFile(filepath.Join(e.volumes, pair, "rw.txt")); err != nil || strings.TrimSpace(string(b)) != "rw" {
		t.Errorf("the pair's writer did not write through its mount: %q %v", b, err)
	}
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(t *testing.T, dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("mount table: %v", err)
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint …; the kernel escapes
		// spaces as \040, which the test's paths do not have.
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && withinDir(fields[4], dir) {
			out = append(out, fields[4])
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// within reports whether path is dir or below it.
func withinDir(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

// unmountUnder takes off every mount left under dir (detached: a busy one
// goes once its last user does), so that the temp dirs can be removed.
func unmountUnder(t *testing.T, dir string) {
	for _, m := range mountsUnder(t, dir) {
		t.Logf("unmounting %s, left by the test", m)
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", m, err)
		}
	}
}

package client

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// doneResult waits for the result of op id.
func (h *volHarness) doneResult(id string) *structs.CSIControllerOpResult {
	h.t.Helper()
	var out *structs.CSIControllerOpResult
	waitFor(h.t, "result of "+id+" reported", func() bool {
		h.srv.csi.mu.Lock()
		defer h.srv.csi.mu.Unlock()
		for _, d := range h.srv.csi.done {
			for _, r := range d.Results {
				if r != nil && r.ID == id {
					out = r
				}
			}
		}
		return out != nil
	})
	return out
}

func (h *volHarness) count(prefix string) int {
	n := 0
	for _, c := range h.log.snapshot() {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// A node-detach op (`volume detach` of a live node) unmounts the running
// alloc's volume from its task, unpublishes and unstages it, and reports
// success; the task keeps running. The alloc's end then has nothing left
// to unmount and reports the claim released. A node-detach of an alloc
// this client does not run succeeds (nothing is mounted); one naming no
// allocation is invalid.
func TestCSINodeDetachExecutor(t *testing.T) {
	h := newVolHarness(t)
	a := h.volAlloc("alloc-eeee-0001", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	bind := filepath.Join(h.c.cfg.AllocDir, a.ID, "app", "srv")
	if !isMounted(t, bind) {
		t.Fatal("the volume is not mounted into the task")
	}
	h.srv.csi.opsCh <- []*structs.CSIControllerOp{
		{ID: "nd1", Kind: structs.CSIControllerOpNodeDetach, PluginID: "hp", ExternalVolumeID: "ext-vol",
			Namespace: a.Namespace, VolumeID: "vol", AllocationID: a.ID},
		{ID: "nd2", Kind: structs.CSIControllerOpNodeDetach, PluginID: "hp", Namespace: a.Namespace, VolumeID: "vol",
			AllocationID: "alloc-not-here"},
		{ID: "nd3", Kind: structs.CSIControllerOpNodeDetach, PluginID: "hp", Namespace: a.Namespace, VolumeID: "vol"},
	}
	if r := h.doneResult("nd1"); r.ErrorKind != "" || r.Error != "" {
		t.Fatalf("node-detach result: %+v", r)
	}
	if r := h.doneResult("nd2"); r.ErrorKind != "" {
		t.Fatalf("node-detach of an alloc not here: %+v", r)
	}
	if r := h.doneResult("nd3"); r.ErrorKind != "invalid" || !strings.Contains(r.Error, "no allocation") {
		t.Fatalf("node-detach naming no alloc: %+v", r)
	}
	if h.count("unpublish ext-vol ") != 1 || h.count("unstage ext-vol ") != 1 {
		t.Fatalf("calls after node-detach: %q", h.log.snapshot())
	}
	if isMounted(t, bind) {
		t.Error("the task bind mount survived the node-detach")
	}
	if st := h.srv.clientStatus(a.ID); st != structs.AllocClientStatusRunning {
		t.Errorf("alloc %s after node-detach, want running", st)
	}

	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "claim released", func() bool { return h.has("release vol " + a.ID + " node-detached") })
	if h.count("unpublish ext-vol ") != 1 || h.count("unstage ext-vol ") != 1 {
		t.Fatalf("the alloc's end unmounted again: %q", h.log.snapshot())
	}
}

// A node-detach whose unpublish fails reports the client's error with its
// kind, naming the allocation.
func TestCSINodeDetachExecutorError(t *testing.T) {
	h := newVolHarness(t)
	a := h.volAlloc("alloc-eeee-0002", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	h.bridge.mu.Lock()
	h.bridge.unpublishErr = structs.NewError(structs.ErrInvalid, "target is busy")
	h.bridge.mu.Unlock()
	h.srv.csi.opsCh <- []*structs.CSIControllerOp{{ID: "nd1", Kind: structs.CSIControllerOpNodeDetach, PluginID: "hp",
		Namespace: a.Namespace, VolumeID: "vol", AllocationID: a.ID}}
	r := h.doneResult("nd1")
	if r.ErrorKind != "invalid" || !strings.Contains(r.Error, "target is busy") || !strings.Contains(r.Error, a.ID) {
		t.Fatalf("node-detach result: %+v", r)
	}
}

// A client that runs only a node plugin (no controller) polls for
// node-detach ops.
func TestCSINodeDetachNodeOnlyPluginPolls(t *testing.T) {
	h := newVolHarnessOf(t, nil, structs.CSIPluginTypeNode)
	h.srv.csi.opsCh <- []*structs.CSIControllerOp{{ID: "nd1", Kind: structs.CSIControllerOpNodeDetach, PluginID: "hp",
		Namespace: "default", VolumeID: "vol", AllocationID: "alloc-not-here"}}
	if r := h.doneResult("nd1"); r.ErrorKind != "" {
		t.Fatalf("node-detach result: %+v", r)
	}
}

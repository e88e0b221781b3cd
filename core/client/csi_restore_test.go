package client

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// A client restarted while a task has a volume mounted restores the
// alloc's volume state: the task keeps its mount, and the later stop is
// released by the new process with what the old one persisted.
func TestCSIVolumeRestoredMountReleased(t *testing.T) {
	h := newVolHarness(t)
	a := h.volAlloc("alloc-rest-0001", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	bind := filepath.Join(h.c.cfg.AllocDir, a.ID, "app", "srv")
	if !isMounted(t, bind) {
		t.Fatal("the task's bind mount is missing")
	}

	h.c.Shutdown()
	if !isMounted(t, bind) {
		t.Fatal("the client's shutdown took the task's mount away")
	}
	c2 := startVolClient(t, h.srv, h.cb, h.world, h.state)
	waitFor(t, "the alloc restored", func() bool { return c2.runner(a.ID) != nil })
	if !isMounted(t, bind) {
		t.Fatal("the restored alloc lost its mount")
	}
	claims := strings.Count(strings.Join(h.log.snapshot(), "\n"), "claim vol write")

	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "released as node-detached", func() bool { return h.has("release vol " + a.ID + " node-detached") })
	calls := h.log.snapshot()
	if !slices.ContainsFunc(calls, func(s string) bool { return strings.HasPrefix(s, "unpublish ext-vol") }) ||
		!slices.ContainsFunc(calls, func(s string) bool { return strings.HasPrefix(s, "unstage ext-vol") }) {
		t.Errorf("the restored release did not unpublish and unstage: %q", calls)
	}
	if n := strings.Count(strings.Join(calls, "\n"), "claim vol write"); n != claims {
		t.Errorf("the restored alloc claimed again (%d claims, %d before the restart)", n, claims)
	}
	if isMounted(t, bind) {
		t.Error("task bind mount left behind")
	}
}

// A client restarted while a stopped alloc's release is still being
// retried (the driver refused to unpublish) carries on with it: the new
// process finishes the node steps and releases the claim node-detached.
func TestCSIVolumePendingReleaseResumed(t *testing.T) {
	h := newVolHarness(t)
	a := h.volAlloc("alloc-rest-0002", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	h.bridge.mu.Lock()
	h.bridge.unpublishErr = errors.Join(csibridge.ErrFailedPrecondition, errors.New("busy"))
	h.bridge.mu.Unlock()
	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "released as unpublishing", func() bool { return h.has("release vol " + a.ID + " unpublishing") })

	h.c.Shutdown()
	if h.has("release vol " + a.ID + " node-detached") {
		t.Fatal("node-detached before the node steps passed")
	}
	h.bridge.mu.Lock()
	h.bridge.unpublishErr = nil
	h.bridge.mu.Unlock()
	startVolClient(t, h.srv, h.cb, h.world, h.state)
	waitFor(t, "the new process releases the claim node-detached", func() bool { return h.has("release vol " + a.ID + " node-detached") })
	if !slices.ContainsFunc(h.log.snapshot(), func(s string) bool { return strings.HasPrefix(s, "unstage ext-vol") }) {
		t.Errorf("not unstaged: %q", h.log.snapshot())
	}
}

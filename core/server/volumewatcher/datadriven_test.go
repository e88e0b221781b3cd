package volumewatcher

// Scripted tests of a volume worker's pass: which claims it hands to the
// Unpublisher, in which state, and what the pass reports (testdata/*.txt,
// run with github.com/cockroachdb/datadriven; `go test -run TestDataDriven
// -rewrite` regenerates the expected output, which must then be read and
// checked).
//
// Each script gets the harness of helpers_test.go (a real state store with
// node n1, plugin hp and a batch job) and its fake Unpublisher, which frees
// a claim outright (or fails while told to). `pass` runs one worker pass
// synchronously, as the worker's goroutine would on a notification, so
// nothing waits on timers; the loop's timing (backoff, idle exit, rate
// limit) is left to watcher_test.go.
//
// Commands:
//
//	volume id=V [mode=ACCESS]
//	    register volume V (access mode single-node-writer by default)
//	alloc id=A
//	    a running allocation of the job on n1
//	claim vol=V alloc=A [mode=read|write]
//	    A takes a claim (write by default)
//	finish alloc=A [status=complete|failed|lost]
//	    the client reports A terminal
//	gc-alloc alloc=A
//	    A is garbage-collected
//	checkpoint vol=V alloc=A state=STATE
//	    a release step recorded earlier (by a client or a previous leader)
//	gc-claim vol=V
//	    a GC pseudo-claim: only writes the volume
//	delete vol=V [force]
//	unpublisher [fail=N] [stuck-at=STATE]
//	    the fake fails its next N calls (-1: all); stuck-at makes every
//	    call checkpoint STATE and then fail, as a release does when the
//	    controller cannot be reached
//	pass vol=V [notify-only]
//	    one pass: the Unpublisher calls it made, its outcome, the volume
//	    after it; notify-only is a pass during a retry backoff, which only
//	    checks whether there is anything left
//	show vol=V
//	    the volume's claims: current (read, write) and past, with states

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &ddVolumes{}
		h := newHarness(t, func(c *Config) { c.Unpublisher = s })
		s.h = h
		datadriven.RunTest(t, path, s.run)
	})
}

// ddVolumes is one script's harness. It is also the watcher's Unpublisher:
// it hands each call to the harness's fake unless told to stop at a state.
type ddVolumes struct {
	h       *harness
	stuckAt *structs.CSIVolumeClaimState
	seen    int // calls of the fake already printed
}

var errStuck = errors.New("could not detach from controller")

func (s *ddVolumes) UnpublishClaim(ctx context.Context, namespace, volumeID string, claim *structs.CSIVolumeClaim) error {
	if s.stuckAt == nil {
		return s.h.un.UnpublishClaim(ctx, namespace, volumeID, claim)
	}
	s.h.un.mu.Lock()
	s.h.un.calls = append(s.h.un.calls, call{ns: namespace, vol: volumeID, claim: claim.Copy()})
	s.h.un.mu.Unlock()
	c := claim.Copy()
	c.State = *s.stuckAt
	if err := s.h.s().CSIVolumeClaims(s.h.next(), []*structs.CSIVolumeClaimRequest{{Namespace: namespace, VolumeID: volumeID, Claim: c}}); err != nil {
		return err
	}
	return errStuck
}

var ddClaimStates = map[string]structs.CSIVolumeClaimState{
	"taken":               structs.CSIVolumeClaimStateTaken,
	"unpublishing":        structs.CSIVolumeClaimStateUnpublishing,
	"node-detached":       structs.CSIVolumeClaimStateNodeDetached,
	"controller-detached": structs.CSIVolumeClaimStateControllerDetached,
	"ready-to-free":       structs.CSIVolumeClaimStateReadyToFree,
}

func ddState(t *testing.T, d *datadriven.TestData, name string) structs.CSIVolumeClaimState {
	st, ok := ddClaimStates[name]
	if !ok {
		d.Fatalf(t, "unknown claim state %q", name)
	}
	return st
}

func (s *ddVolumes) run(t *testing.T, d *datadriven.TestData) string {
	h := s.h
	var vol, alloc string
	switch d.Cmd {
	case "volume":
		d.ScanArgs(t, "id", &vol)
		mode := string(structs.CSIVolumeAccessModeSingleNodeWriter)
		d.MaybeScanArgs(t, "mode", &mode)
		h.volume(vol, structs.CSIVolumeAccessMode(mode))
		return s.show(vol)
	case "alloc":
		d.ScanArgs(t, "id", &alloc)
		a := &structs.Allocation{ID: alloc, Namespace: ns, EvalID: "eval-" + alloc,
			Name: structs.AllocName(h.job.ID, "web", 0), NodeID: h.node.ID, JobID: h.job.ID, Job: h.job,
			TaskGroup: "web", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
		return result(h.s().UpsertAllocs(h.next(), []*structs.Allocation{a}))
	case "claim":
		d.ScanArgs(t, "vol", &vol)
		d.ScanArgs(t, "alloc", &alloc)
		mode := "write"
		d.MaybeScanArgs(t, "mode", &mode)
		claimMode := map[string]structs.CSIVolumeClaimMode{"read": structs.CSIVolumeClaimRead, "write": structs.CSIVolumeClaimWrite}[mode]
		v := h.vol(vol)
		access := v.RequestedCapabilities[0].AccessMode
		err := h.s().CSIVolumeClaims(h.next(), []*structs.CSIVolumeClaimRequest{{Namespace: ns, VolumeID: vol,
			Claim: &structs.CSIVolumeClaim{AllocationID: alloc, NodeID: h.node.ID, ExternalNodeID: "csi-n1", Mode: claimMode,
				AccessMode: access, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}})
		if err != nil {
			return result(err)
		}
		return s.show(vol)
	case "finish":
		d.ScanArgs(t, "alloc", &alloc)
		status := structs.AllocClientStatusComplete
		d.MaybeScanArgs(t, "status", &status)
		return result(h.s().UpdateAllocsFromClient(h.next(), []*structs.Allocation{{ID: alloc, ClientStatus: status}}))
	case "gc-alloc":
		d.ScanArgs(t, "alloc", &alloc)
		return result(h.s().DeleteEval(h.next(), nil, []string{alloc}))
	case "checkpoint":
		var state string
		d.ScanArgs(t, "vol", &vol)
		d.ScanArgs(t, "alloc", &alloc)
		d.ScanArgs(t, "state", &state)
		err := h.s().CSIVolumeClaims(h.next(), []*structs.CSIVolumeClaimRequest{{Namespace: ns, VolumeID: vol,
			Claim: &structs.CSIVolumeClaim{AllocationID: alloc, Mode: structs.CSIVolumeClaimGC, State: ddState(t, d, state)}}})
		if err != nil {
			return result(err)
		}
		return s.show(vol)
	case "gc-claim":
		d.ScanArgs(t, "vol", &vol)
		h.gcClaim(vol)
		return "ok\n"
	case "delete":
		d.ScanArgs(t, "vol", &vol)
		return result(h.s().DeleteCSIVolumes(h.next(), ns, []string{vol}, d.HasArg("force")))
	case "unpublisher":
		var fail int
		if d.MaybeScanArgs(t, "fail", &fail) {
			h.un.setFail(fail)
		}
		var state string
		if d.MaybeScanArgs(t, "stuck-at", &state) {
			st := ddState(t, d, state)
			s.stuckAt = &st
		} else {
			s.stuckAt = nil
		}
		return "ok\n"
	case "pass":
		d.ScanArgs(t, "vol", &vol)
		return s.pass(vol, !d.HasArg("notify-only"))
	case "show":
		d.ScanArgs(t, "vol", &vol)
		return s.show(vol)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func result(err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return "ok\n"
}

// pass runs one pass of vol's worker on the test's goroutine. The worker
// is not started: only what pass reads of it is set.
func (s *ddVolumes) pass(vol string, release bool) string {
	wk := &worker{w: s.h.w, key: volKey{ns, vol}, logger: hclog.NewNullLogger()}
	out := wk.pass(context.Background(), release)
	var b strings.Builder
	calls := s.h.un.snapshot()
	for _, c := range calls[s.seen:] {
		fmt.Fprintf(&b, "unpublish %s: %s\n", c.claim.AllocationID, s.describeClaim(c.claim))
	}
	s.seen = len(calls)
	fmt.Fprintf(&b, "outcome: %s\n", map[outcome]string{outcomeOK: "ok", outcomeFailed: "failed (retry after backoff)",
		outcomeDone: "done (worker may exit)"}[out])
	b.WriteString(s.show(vol))
	return b.String()
}

func (s *ddVolumes) describeClaim(c *structs.CSIVolumeClaim) string {
	node := c.NodeID
	if node == s.h.node.ID {
		node = "n1"
	}
	return fmt.Sprintf("state=%s mode=%s node=%s", c.State, c.Mode, node)
}

func (s *ddVolumes) show(vol string) string {
	v := s.h.vol(vol)
	if v == nil {
		return "volume " + vol + " gone\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "volume %s", vol)
	if v.AccessMode != "" {
		fmt.Fprintf(&b, " access=%s", v.AccessMode)
	}
	if !v.InUse() {
		b.WriteString(" (no claims)")
	}
	b.WriteString("\n")
	for _, part := range []struct {
		name   string
		claims map[string]*structs.CSIVolumeClaim
		allocs map[string]*structs.Allocation
	}{{"read", v.ReadClaims, v.ReadAllocs}, {"write", v.WriteClaims, v.WriteAllocs}, {"past", v.PastClaims, nil}} {
		ids := make([]string, 0, len(part.claims))
		for id := range part.claims {
			ids = append(ids, id)
		}
		for id := range part.allocs {
			if _, ok := part.claims[id]; !ok {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			c := part.claims[id]
			if c == nil {
				fmt.Fprintf(&b, "  %s %s: (alloc without claim)\n", part.name, id)
				continue
			}
			fmt.Fprintf(&b, "  %s %s: %s\n", part.name, id, s.describeClaim(c))
		}
	}
	return b.String()
}

func (s *ddVolumes) UnpublishClaims(ctx context.Context, namespace, volumeID string, claims []*structs.CSIVolumeClaim) []error {
	return eachClaim(ctx, namespace, volumeID, claims, s.UnpublishClaim)
}

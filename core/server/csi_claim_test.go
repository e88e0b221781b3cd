package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/server/csivolumes"
	"github.com/drover-org/drover/core/server/volumewatcher"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
)

// fakeController is a controller client: it polls the leader for
// controller calls and answers them through answer.
type fakeController struct {
	mu     sync.Mutex
	ops    []*structs.CSIControllerOp
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// stop ends the controller's polling and waits for it.
func (fc *fakeController) stop() {
	fc.cancel()
	fc.wg.Wait()
}

func startFakeController(t *testing.T, s *Server, node *structs.Node, answer func(op *structs.CSIControllerOp) *structs.CSIControllerOpResult) *fakeController {
	t.Helper()
	fc := &fakeController{}
	ctx, cancel := context.WithCancel(context.Background())
	fc.cancel = cancel
	t.Cleanup(fc.stop)
	fc.wg.Add(1)
	go func() {
		defer fc.wg.Done()
		for ctx.Err() == nil {
			r, err := s.CSI().ControllerOps(ctx, &structs.CSIControllerPollArgs{NodeID: node.ID, SecretID: node.SecretID, MaxWait: int64(time.Second)})
			if err != nil {
				return
			}
			var res []*structs.CSIControllerOpResult
			for _, op := range r.Ops {
				fc.mu.Lock()
				fc.ops = append(fc.ops, op)
				fc.mu.Unlock()
				out := answer(op)
				out.ID = op.ID
				res = append(res, out)
			}
			if len(res) > 0 {
				if err := s.CSI().ControllerDone(ctx, &structs.CSIControllerDoneArgs{NodeID: node.ID, SecretID: node.SecretID, Results: res}); err != nil {
					return
				}
			}
		}
	}()
	return fc
}

func (fc *fakeController) calls() []*structs.CSIControllerOp {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]*structs.CSIControllerOp(nil), fc.ops...)
}

// confirmValidate answers a validate op as confirmed, any other op with
// success.
func confirmValidate(op *structs.CSIControllerOp) *structs.CSIControllerOpResult {
	if op.Kind == structs.CSIControllerOpValidate {
		return &structs.CSIControllerOpResult{Validation: &structs.CSIVolumeValidation{Confirmed: true}}
	}
	return &structs.CSIControllerOpResult{}
}

// csiSetup registers a node running a monolith plugin hp (node and
// controller, attach/detach), a volume v1 of it (its validation answered
// by a controller client that stops again), and a sysbatch job claiming
// v1, and waits for the job's alloc on the node.
func csiSetup(t *testing.T, s *Server) (*structs.Node, *structs.Allocation) {
	t.Helper()
	ctx := context.Background()
	node := csiNode("a", "hp", true)
	node.CSINodePlugins["hp"].RequiresControllerPlugin = true
	node.CSIControllerPlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true, RequiresControllerPlugin: true,
		ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}
	if _, err := s.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	vol := csiVol("v1", "hp")
	vol.ExternalID = "ext-1"
	vol.Secrets = map[string]string{"token": "s3cret"}
	validator := startFakeController(t, s, node, confirmValidate)
	_, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{vol})
	validator.stop()
	if err != nil {
		t.Fatal(err)
	}
	j := testJob("writer", "sysbatch")
	j.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: "csi", Source: "v1",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	if _, err := s.Jobs().Register(ctx, j, false, 0); err != nil {
		t.Fatal(err)
	}
	var alloc *structs.Allocation
	waitFor(t, 10*time.Second, "the job's alloc on the plugin node", func() bool {
		as, _ := s.State().AllocsByJob(nil, structs.DefaultNamespace, "writer", true)
		if len(as) == 1 {
			alloc = as[0]
		}
		return alloc != nil
	})
	if alloc.NodeID != node.ID {
		t.Fatalf("alloc on %s, want %s", alloc.NodeID, node.ID)
	}
	return node, alloc
}

func claimArgs(node *structs.Node, alloc *structs.Allocation) *structs.CSIVolumeClaimArgs {
	return &structs.CSIVolumeClaimArgs{NodeID: node.ID, SecretID: node.SecretID, Namespace: structs.DefaultNamespace,
		VolumeID: "v1", AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
}

// A claim is published by the controller client before it is stored with
// everything a release needs; a repeated claim is answered from state; the
// release detaches through the controller with the stored IDs and frees.
func TestCSIClaimAndReleaseThroughController(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	fc := startFakeController(t, s, node, func(op *structs.CSIControllerOp) *structs.CSIControllerOpResult {
		if op.Kind == structs.CSIControllerOpPublish {
			return &structs.CSIControllerOpResult{PublishContext: map[string]string{"device": "/dev/fake"}}
		}
		return &structs.CSIControllerOpResult{}
	})
	ctx := context.Background()
	r, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc))
	if err != nil {
		t.Fatal(err)
	}
	if r.PublishContext["device"] != "/dev/fake" || r.Volume == nil || r.Volume.Secrets["token"] != "s3cret" {
		t.Fatalf("reply = %+v", r)
	}
	c := r.Claim
	if c.ExternalNodeID != "csi-a" || c.ExternalVolumeID != "ext-1" || c.ControllerNodeID != node.ID || c.PublishContext["device"] != "/dev/fake" {
		t.Fatalf("stored claim = %+v", c)
	}
	ops := fc.calls()
	if len(ops) != 1 || ops[0].Kind != structs.CSIControllerOpPublish || ops[0].ExternalNodeID != "csi-a" ||
		ops[0].ExternalVolumeID != "ext-1" || ops[0].Secrets["token"] != "s3cret" || ops[0].ReadOnly {
		t.Fatalf("controller ops = %+v", ops)
	}
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	if n := len(fc.calls()); n != 1 {
		t.Fatalf("a repeated claim made %d controller calls, want none", n-1)
	}

	_, err = s.CSI().UnpublishVolume(ctx, &structs.CSIVolumeUnpublishArgs{NodeID: node.ID, SecretID: node.SecretID,
		Namespace: structs.DefaultNamespace, VolumeID: "v1",
		Claim: &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateNodeDetached}})
	if err != nil {
		t.Fatal(err)
	}
	// The client's report is recorded; the volume watcher takes the claim
	// from there to freed.
	waitFor(t, 10*time.Second, "the claim freed", func() bool {
		v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
		return v != nil && !v.InUse()
	})
	ops = fc.calls()
	if len(ops) != 2 || ops[1].Kind != structs.CSIControllerOpUnpublish || ops[1].ExternalNodeID != "csi-a" || ops[1].ExternalVolumeID != "ext-1" {
		t.Fatalf("controller ops = %+v", ops)
	}
	v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	if v.InUse() || len(v.PastClaims) != 0 || v.AccessMode != structs.CSIVolumeAccessModeUnknown {
		t.Fatalf("volume after release: write=%v past=%v mode=%q", v.WriteClaims, v.PastClaims, v.AccessMode)
	}
}

// Bad claims are refused with their kind and change nothing.
func TestCSIClaimRefusals(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	other := csiNode("b", "hp", true)
	if _, err := s.Nodes().Register(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		mut  func(a *structs.CSIVolumeClaimArgs)
		kind error
		want string
	}{
		{"wrong secret", func(a *structs.CSIVolumeClaimArgs) { a.SecretID = "nope" }, structs.ErrPermissionDenied, "secret"},
		{"another node's alloc", func(a *structs.CSIVolumeClaimArgs) { a.NodeID, a.SecretID = other.ID, other.SecretID }, structs.ErrNotFound, "not found on node"},
		{"gc mode", func(a *structs.CSIVolumeClaimArgs) { a.Mode = structs.CSIVolumeClaimGC }, structs.ErrInvalid, "not a claim a client may take"},
		{"no volume", func(a *structs.CSIVolumeClaimArgs) { a.VolumeID = "nosuch" }, structs.ErrNotFound, "volume not found"},
		{"bad volume ID", func(a *structs.CSIVolumeClaimArgs) { a.VolumeID = "a/b" }, structs.ErrInvalid, "VolumeID"},
		{"other namespace", func(a *structs.CSIVolumeClaimArgs) { a.Namespace = "other" }, structs.ErrInvalid, "namespace"},
		{"bad access mode", func(a *structs.CSIVolumeClaimArgs) { a.AccessMode = "sideways" }, structs.ErrInvalid, "AccessMode"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := claimArgs(node, alloc)
			tc.mut(a)
			_, err := s.CSI().ClaimVolume(context.Background(), a)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.kind, tc.want)
			}
			v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
			if v.InUse() {
				t.Fatal("a refused claim was stored")
			}
		})
	}
}

// A controller that fails the detach leaves the claim node-detached (the
// volume still claimed); the volume watcher, the release's one driver,
// retries it with a doubling backoff, never in a tight loop, and frees it.
// NotFound from the driver counts as detached.
func TestCSIReleaseControllerFailureKeepsCheckpoint(t *testing.T) {
	testtier.Slow(t, "waits out the volume watcher's real backoff: 1 s, 2 s, 4 s")
	// Full tier, and only waits: beside the other waiting tests.
	t.Parallel()
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	var mu sync.Mutex
	const failures = 3
	fails := failures
	var detaches []time.Time
	startFakeController(t, s, node, func(op *structs.CSIControllerOp) *structs.CSIControllerOpResult {
		if op.Kind != structs.CSIControllerOpUnpublish {
			return &structs.CSIControllerOpResult{}
		}
		mu.Lock()
		defer mu.Unlock()
		detaches = append(detaches, time.Now())
		if fails > 0 {
			fails--
			return &structs.CSIControllerOpResult{ErrorKind: "unavailable", Error: "controller busy"}
		}
		return &structs.CSIControllerOpResult{ErrorKind: "not_found", Error: "no such attachment"}
	})
	calls := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), detaches...)
	}
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rel := &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateNodeDetached}
	if _, err := s.CSI().UnpublishVolume(ctx, &structs.CSIVolumeUnpublishArgs{NodeID: node.ID, SecretID: node.SecretID,
		Namespace: structs.DefaultNamespace, VolumeID: "v1", Claim: rel}); err != nil {
		t.Fatal(err)
	}
	// The report is recorded, and stays the claim's state through the
	// failed detaches.
	v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	if p := v.PastClaims[alloc.ID]; p == nil || p.State != structs.CSIVolumeClaimStateNodeDetached || p.ExternalNodeID != "csi-a" ||
		p.Mode != structs.CSIVolumeClaimWrite {
		t.Fatalf("past claim = %+v", p)
	}
	waitFor(t, 10*time.Second, "a failed controller detach", func() bool { return len(calls()) >= 1 })
	v, _ = s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	if p := v.PastClaims[alloc.ID]; p == nil || p.State != structs.CSIVolumeClaimStateNodeDetached {
		t.Fatalf("past claim after a failed detach = %+v", p)
	}
	// The watcher retries: the further failures, then NotFound.
	waitFor(t, 30*time.Second, "the claim freed", func() bool {
		v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
		return v != nil && !v.InUse() && len(v.PastClaims) == 0
	})
	elapsed := time.Since(start)
	at := calls()
	if len(at) != failures+1 {
		t.Fatalf("%d controller detaches, want %d (%d failures, then NotFound)", len(at), failures+1, failures)
	}
	// The watcher, woken by the client's report, makes the first attempt;
	// from there it waits its backoff (1s), doubling: 1s, 2s, 4s.
	backoff := volumewatcher.DefaultBackoff
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < backoff {
			t.Errorf("detach %d came %v after the previous, want at least %v", i+1, gap, backoff)
		}
		backoff *= 2
	}
	// Never a tight loop: no more attempts than the backoff allows.
	if bound := 2 + int(elapsed/volumewatcher.DefaultBackoff); len(at) > bound {
		t.Errorf("%d detaches in %v, more than %d", len(at), elapsed, bound)
	}
}

// A client's release of a claim waits for its node while the node is up
// and has not unpublished; the volume stays claimed.
func TestCSIReleaseWaitsForNode(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	startFakeController(t, s, node, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{}
	})
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	_, err := s.CSI().UnpublishVolume(ctx, &structs.CSIVolumeUnpublishArgs{NodeID: node.ID, SecretID: node.SecretID,
		Namespace: structs.DefaultNamespace, VolumeID: "v1",
		Claim: &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateUnpublishing}})
	if !errors.Is(err, structs.ErrUnavailable) || !strings.Contains(err.Error(), "waiting for node") {
		t.Fatalf("err = %v", err)
	}
	v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	if p := v.PastClaims[alloc.ID]; p == nil || p.State != structs.CSIVolumeClaimStateUnpublishing {
		t.Fatalf("past claim = %+v", p)
	}
	// Another client cannot release it.
	other := csiNode("b", "hp", true)
	if _, err := s.Nodes().Register(ctx, other); err != nil {
		t.Fatal(err)
	}
	_, err = s.CSI().UnpublishVolume(ctx, &structs.CSIVolumeUnpublishArgs{NodeID: other.ID, SecretID: other.SecretID,
		Namespace: structs.DefaultNamespace, VolumeID: "v1",
		Claim: &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateNodeDetached}})
	if !errors.Is(err, structs.ErrPermissionDenied) {
		t.Fatalf("err = %v", err)
	}
}

// A second writer of a single-node-writer volume cannot be placed while
// the first holds the claim, through the first alloc's end (its claim is
// still being released), and is placed once the claim is freed: the write
// that frees it carries an eval of the waiting job. Sysbatch jobs never
// block, so nothing else would evaluate it again.
func TestCSIWaitingWriterPlacedWhenClaimFreed(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	startFakeController(t, s, node, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{}
	})
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	j := testJob("second", "sysbatch")
	j.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: "csi", Source: "v1",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	if _, err := s.Jobs().Register(ctx, j, false, 0); err != nil {
		t.Fatal(err)
	}
	failedEvals := func() int {
		evs, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, "second")
		n := 0
		for _, ev := range evs {
			if ev.Status == structs.EvalStatusComplete && len(ev.FailedTGAllocs) > 0 {
				n++
			}
		}
		return n
	}
	secondAllocs := func() int {
		as, _ := s.State().AllocsByJob(nil, structs.DefaultNamespace, "second", true)
		return len(as)
	}
	waitFor(t, 10*time.Second, "the second writer's eval to fail its placement", func() bool { return failedEvals() == 1 })

	// The first alloc ends; its claim is held until it is released.
	u := alloc.Copy()
	u.ClientStatus = structs.AllocClientStatusComplete
	if err := s.Nodes().UpdateAllocs(ctx, node.ID, node.SecretID, []*structs.Allocation{u}); err != nil {
		t.Fatal(err)
	}
	if n := secondAllocs(); n != 0 {
		t.Fatalf("the second writer was placed while the first's claim was held (%d allocs)", n)
	}

	// The client releases the claim: freed, and the waiting writer placed.
	_, err := s.CSI().UnpublishVolume(ctx, &structs.CSIVolumeUnpublishArgs{NodeID: node.ID, SecretID: node.SecretID,
		Namespace: structs.DefaultNamespace, VolumeID: "v1",
		Claim: &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateNodeDetached}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the second writer placed", func() bool { return secondAllocs() == 1 })
	evs, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, "second")
	triggers := map[string]int{}
	for _, ev := range evs {
		triggers[ev.TriggeredBy]++
	}
	if triggers[structs.EvalTriggerQueuedAllocs] != 1 {
		t.Errorf("eval triggers = %v, want one %s", triggers, structs.EvalTriggerQueuedAllocs)
	}
	// The first writer's job, which placed everything, was not evaluated again.
	first, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, "writer")
	for _, ev := range first {
		if ev.TriggeredBy == structs.EvalTriggerQueuedAllocs {
			t.Errorf("the writer's job got a %s eval", ev.TriggeredBy)
		}
	}
}

// A job that asks for a volume not registered yet cannot place; the
// registration carries an eval of it, and it is placed.
func TestCSIJobPlacedWhenVolumeRegistered(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	node := csiNode("a", "hp", true)
	if _, err := s.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	j := testJob("early", "sysbatch")
	j.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: "csi", Source: "later",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	if _, err := s.Jobs().Register(ctx, j, false, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job's eval to fail its placement", func() bool {
		evs, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, "early")
		return len(evs) == 1 && evs[0].Status == structs.EvalStatusComplete && len(evs[0].FailedTGAllocs) > 0
	})
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{csiVol("later", "hp")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the job placed", func() bool {
		as, _ := s.State().AllocsByJob(nil, structs.DefaultNamespace, "early", true)
		return len(as) == 1 && as[0].NodeID == node.ID
	})
}

// A slow controller: a publish the controller client takes but does not
// answer before the claim's deadline fails the claim with ErrUnavailable
// naming the deadline, and stores nothing. The plugin is free again at
// once: the late result of the timed-out call is dropped, and the
// client's retried claim is published by a fresh call and stored.
func TestCSIClaimSlowControllerTimesOut(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	handed := make(chan *structs.CSIControllerOp, 4)
	pctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for pctx.Err() == nil {
			r, err := s.CSI().ControllerOps(pctx, &structs.CSIControllerPollArgs{NodeID: node.ID, SecretID: node.SecretID, MaxWait: int64(time.Second)})
			if err != nil {
				return
			}
			for _, op := range r.Ops {
				handed <- op
			}
		}
	}()
	answer := func(op *structs.CSIControllerOp) {
		t.Helper()
		err := s.CSI().ControllerDone(context.Background(), &structs.CSIControllerDoneArgs{NodeID: node.ID, SecretID: node.SecretID,
			Results: []*structs.CSIControllerOpResult{{ID: op.ID, PublishContext: map[string]string{"device": "/dev/" + op.ID}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	next := func() *structs.CSIControllerOp {
		t.Helper()
		select {
		case op := <-handed:
			return op
		case <-time.After(20 * time.Second):
			t.Fatal("no controller call handed out")
			return nil
		}
	}

	const deadline = 300 * time.Millisecond
	ctx, cancelClaim := context.WithTimeout(context.Background(), deadline)
	defer cancelClaim()
	claimErr := make(chan error, 1)
	go func() {
		_, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc))
		claimErr <- err
	}()
	slow := next() // taken, never answered in time
	if slow.Kind != structs.CSIControllerOpPublish {
		t.Fatalf("op = %+v", slow)
	}
	select {
	case err := <-claimErr:
		if !errors.Is(err, structs.ErrUnavailable) || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Fatalf("slow claim: %v, want ErrUnavailable naming the deadline", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the slow claim never ended")
	}
	if v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1"); v.InUse() {
		t.Fatal("a timed-out claim was stored")
	}
	answer(slow) // late: dropped

	claimed := make(chan error, 1)
	go func() {
		r, err := s.CSI().ClaimVolume(context.Background(), claimArgs(node, alloc))
		if err == nil && r.PublishContext["device"] == "/dev/"+slow.ID {
			err = errors.New("the claim took the timed-out call's result")
		}
		claimed <- err
	}()
	retry := next()
	if retry.ID == slow.ID || retry.Kind != structs.CSIControllerOpPublish {
		t.Fatalf("retried claim's call = %+v", retry)
	}
	answer(retry)
	select {
	case err := <-claimed:
		if err != nil {
			t.Fatalf("retried claim: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the retried claim never ended")
	}
	if v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1"); v.ClaimFor(alloc.ID) == nil {
		t.Fatal("the retried claim was not stored")
	}
}

// A volume write carries at most maxVolumeWaiterEvals evals of waiting
// jobs; the others wait for a later write.
func TestCSIVolumeWaiterEvalsBounded(t *testing.T) {
	old := maxVolumeWaiterEvals
	maxVolumeWaiterEvals = 2
	t.Cleanup(func() { maxVolumeWaiterEvals = old })
	s := testServer(t, nil)
	ctx := context.Background()
	if _, err := s.Nodes().Register(ctx, csiNode("a", "hp", true)); err != nil {
		t.Fatal(err)
	}
	ids := []string{"w1", "w2", "w3"}
	for _, id := range ids {
		j := testJob(id, "sysbatch")
		j.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: "csi", Source: "later",
			AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem, ReadOnly: true}}
		if _, err := s.Jobs().Register(ctx, j, false, 0); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "every job's placement to fail", func() bool {
		for _, id := range ids {
			evs, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, id)
			if !csivolumes.LastEvalFailedPlacement(evs) || len(evs) != 1 || evs[0].Status != structs.EvalStatusComplete {
				return false
			}
		}
		return true
	})
	evals, err := s.csi.WaiterEvals(structs.DefaultNamespace, []string{"later"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) != 2 {
		t.Fatalf("%d evals for 3 waiting jobs, want the bound of 2", len(evals))
	}
}

// `volume detach` of a claim on a live node has that node's client
// node-detach the allocation's volume (an op addressed to the claim's
// node, pulled like controller work), then the controller detaches and
// the claim is freed.
func TestCSIDetachLiveNodePushesNodeDetach(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	fc := startFakeController(t, s, node, func(*structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{}
	})
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := s.CSI().DetachCSIVolume(dctx, structs.DefaultNamespace, "v1", node.ID); err != nil {
		t.Fatal(err)
	}
	ops := fc.calls()
	if len(ops) != 3 {
		t.Fatalf("ops = %+v, want publish, node-detach, unpublish", ops)
	}
	nd := ops[1]
	if nd.Kind != structs.CSIControllerOpNodeDetach || nd.AllocationID != alloc.ID || nd.VolumeID != "v1" ||
		nd.Namespace != structs.DefaultNamespace || nd.PluginID != "hp" || nd.ExternalVolumeID != "ext-1" || len(nd.Secrets) != 0 {
		t.Fatalf("node-detach op = %+v", nd)
	}
	if ops[2].Kind != structs.CSIControllerOpUnpublish || ops[2].ExternalNodeID != "csi-a" {
		t.Fatalf("controller op = %+v", ops[2])
	}
	v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	if v.InUse() || len(v.PastClaims) != 0 {
		t.Fatalf("volume after detach: write=%v past=%v", v.WriteClaims, v.PastClaims)
	}
}

// A node-detach the client fails fails the detach with the client's
// error and kind; the claim stays unpublishing (the controller is not
// asked), for a later detach or the client's own release.
func TestCSIDetachNodeFailureKeepsClaim(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	fc := startFakeController(t, s, node, func(op *structs.CSIControllerOp) *structs.CSIControllerOpResult {
		if op.Kind == structs.CSIControllerOpNodeDetach {
			return &structs.CSIControllerOpResult{ErrorKind: "invalid", Error: "unstage: target is busy"}
		}
		return &structs.CSIControllerOpResult{}
	})
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := s.CSI().DetachCSIVolume(dctx, structs.DefaultNamespace, "v1", node.ID)
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "target is busy") || !strings.Contains(err.Error(), node.ID) {
		t.Fatalf("err = %v", err)
	}
	for _, op := range fc.calls() {
		if op.Kind == structs.CSIControllerOpUnpublish {
			t.Fatal("the controller detached a volume its node did not unpublish")
		}
	}
	v, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	if p := v.PastClaims[alloc.ID]; p == nil || p.State != structs.CSIVolumeClaimStateUnpublishing || len(v.WriteClaims) != 1 {
		t.Fatalf("past claim = %+v, write = %v", p, v.WriteClaims)
	}
}

// A node that does not take the node-detach (it runs no plugin, so does
// not poll) fails the detach as unavailable within the pickup time.
func TestCSIDetachNodeNotPolling(t *testing.T) {
	s := testServer(t, nil)
	s.csi.Queue().SetPickup(200 * time.Millisecond)
	node, alloc := csiSetup(t, s)
	fc := startFakeController(t, s, node, confirmValidate)
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	fc.stop()
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err := s.CSI().DetachCSIVolume(dctx, structs.DefaultNamespace, "v1", node.ID)
	if !errors.Is(err, structs.ErrUnavailable) || !strings.Contains(err.Error(), "did not take the call") {
		t.Fatalf("err = %v", err)
	}
}

// A detach naming an unknown node, or a node without a claim of the
// volume, is refused as not found, naming it, and changes nothing.
func TestCSIDetachRefusals(t *testing.T) {
	s := testServer(t, nil)
	node, alloc := csiSetup(t, s)
	startFakeController(t, s, node, confirmValidate)
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	other := csiNode("b", "hp", true)
	if _, err := s.Nodes().Register(ctx, other); err != nil {
		t.Fatal(err)
	}
	before, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	tests := []struct {
		node, want string
		kind       error
	}{
		{"00000000-0000-0000-0000-00000000beef", "node not found: 00000000-0000-0000-0000-00000000beef", structs.ErrNotFound},
		{other.ID, "node " + other.ID + " holds no claim of volume \"v1\"", structs.ErrNotFound},
		{strings.Repeat("n", 200), "node ID: longer than", structs.ErrInvalid},
	}
	for _, tc := range tests {
		_, err := s.CSI().DetachCSIVolume(ctx, structs.DefaultNamespace, "v1", tc.node)
		if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("detach from %.20s: err = %v, want %v containing %q", tc.node, err, tc.kind, tc.want)
		}
	}
	after, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v1")
	if after.ModifyIndex != before.ModifyIndex || len(after.WriteClaims) != 1 || len(after.PastClaims) != 0 {
		t.Fatalf("a refused detach changed the volume: %d → %d, write=%v past=%v", before.ModifyIndex, after.ModifyIndex,
			after.WriteClaims, after.PastClaims)
	}
}

// `volume detach` of a node holding several claims of a volume
// node-detaches each, has the controller detach the volume once, after
// the last node-detach (the node unpublished it everywhere), and frees
// them all in one write.
func TestCSIDetachNodeFreesItsClaimsInOneWrite(t *testing.T) {
	s := testServer(t, nil)
	node, _ := csiSetup(t, s)
	fc := startFakeController(t, s, node, confirmValidate)
	ctx := context.Background()
	vol := csiVol("shared", "hp")
	vol.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{vol}); err != nil {
		t.Fatal(err)
	}
	j := testJob("holders", "batch")
	j.TaskGroups[0].Count = 2
	reg, err := s.Jobs().Register(ctx, j, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	var allocs []*structs.Allocation
	waitFor(t, 10*time.Second, "two allocs", func() bool {
		allocs, _ = s.State().AllocsByJob(nil, structs.DefaultNamespace, "holders", true)
		return len(allocs) == 2
	})
	// The worker records the eval after the plan that made the allocs: let
	// that write land before counting the detach's.
	waitEvalTerminal(t, s, reg.EvalID)
	for _, a := range allocs {
		_, err := s.CSI().ClaimVolume(ctx, &structs.CSIVolumeClaimArgs{NodeID: node.ID, SecretID: node.SecretID,
			Namespace: structs.DefaultNamespace, VolumeID: "shared", AllocationID: a.ID, Mode: structs.CSIVolumeClaimWrite,
			AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem})
		if err != nil {
			t.Fatal(err)
		}
	}
	n0, i0 := len(fc.calls()), s.raft.LastIndex()
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	idx, err := s.CSI().DetachCSIVolume(dctx, structs.DefaultNamespace, "shared", node.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, op := range fc.calls()[n0:] {
		kinds = append(kinds, string(op.Kind))
	}
	want := []string{string(structs.CSIControllerOpNodeDetach), string(structs.CSIControllerOpNodeDetach), string(structs.CSIControllerOpUnpublish)}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Fatalf("ops = %v, want %v", kinds, want)
	}
	after, _ := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "shared")
	if after.InUse() || len(after.PastClaims) != 0 {
		t.Fatalf("volume after detach: write=%v past=%v", after.WriteClaims, after.PastClaims)
	}
	// One write: the log grew by one entry, the detach's.
	if i1 := s.raft.LastIndex(); i1 != i0+1 || idx != i1 || after.ModifyIndex != idx {
		t.Fatalf("log %d → %d, detach index %d, volume index %d: want one write", i0, i1, idx, after.ModifyIndex)
	}
}

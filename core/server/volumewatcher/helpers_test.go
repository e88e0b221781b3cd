package volumewatcher

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const ns = structs.DefaultNamespace

// harness is a real state store with a plugin node and a job, a fake
// unpublisher, and a watcher with small intervals.
type harness struct {
	t     *testing.T
	store atomic.Pointer[state.StateStore] // the store the test writes
	live  atomic.Pointer[state.StateStore] // the store the watcher reads
	index atomic.Uint64
	node  *structs.Node
	job   *structs.Job
	un    *fakeUnpublisher
	w     *Watcher
}

func newHarness(t *testing.T, tune func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t}
	h.index.Store(100)
	s, err := state.NewStateStore()
	must(t, err)
	h.store.Store(s)
	h.live.Store(s)
	h.node = &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n1", Datacenter: "dc1",
		NodePool: structs.NodePoolDefault, Status: structs.NodeStatusReady,
		CSINodePlugins: map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true,
			NodeInfo: &structs.CSINodeInfo{ID: "csi-n1"}}},
	}
	must(t, s.UpsertNode(h.next(), h.node))
	job := &structs.Job{ID: "job-" + uuid.NewString()[:8], Namespace: ns, Type: "batch",
		TaskGroups: []*structs.TaskGroup{{Name: "web", Count: 3,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"}}}}}}
	job.Canonicalize()
	must(t, s.UpsertJob(h.next(), job))
	h.job, err = s.JobByID(nil, ns, job.ID)
	must(t, err)
	h.un = &fakeUnpublisher{h: h}
	cfg := Config{
		State:       h.live.Load,
		Unpublisher: h.un,
		Logger:      hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}}),
		Rate:        1000,
		Burst:       10,
		Backoff:     5 * time.Millisecond,
		MaxBackoff:  20 * time.Millisecond,
		Idle:        time.Minute,
	}
	if tune != nil {
		tune(&cfg)
	}
	h.w = New(cfg)
	t.Cleanup(h.w.Stop)
	return h
}

func (h *harness) next() uint64         { return h.index.Add(1) }
func (h *harness) s() *state.StateStore { return h.store.Load() }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (h *harness) ok(err error) { h.t.Helper(); must(h.t, err) }

func (h *harness) vol(id string) *structs.CSIVolume {
	h.t.Helper()
	v, err := h.s().CSIVolumeRaw(nil, ns, id)
	h.ok(err)
	return v
}

// volume registers volume id on plugin hp.
func (h *harness) volume(id string, mode structs.CSIVolumeAccessMode) {
	h.t.Helper()
	h.ok(h.s().UpsertCSIVolumes(h.next(), []*structs.CSIVolume{{ID: id, Namespace: ns, PluginID: "hp", ExternalID: "ext-" + id,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: mode,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}}))
}

// alloc stores a running allocation of the job.
func (h *harness) alloc() *structs.Allocation {
	h.t.Helper()
	a := &structs.Allocation{ID: uuid.NewString(), Namespace: ns, EvalID: uuid.NewString(),
		Name: structs.AllocName(h.job.ID, "web", 0), NodeID: h.node.ID, JobID: h.job.ID, Job: h.job,
		TaskGroup: "web", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
	h.ok(h.s().UpsertAllocs(h.next(), []*structs.Allocation{a}))
	return a
}

// claim takes a claim of mode on volume id for alloc a.
func (h *harness) claim(id string, a *structs.Allocation, mode structs.CSIVolumeClaimMode, access structs.CSIVolumeAccessMode) {
	h.t.Helper()
	h.ok(h.s().CSIVolumeClaims(h.next(), []*structs.CSIVolumeClaimRequest{{Namespace: ns, VolumeID: id,
		Claim: &structs.CSIVolumeClaim{AllocationID: a.ID, NodeID: a.NodeID, ExternalNodeID: "csi-n1", Mode: mode,
			AccessMode: access, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}))
}

// gcClaim writes a GC pseudo-claim: it only bumps the volume's index.
func (h *harness) gcClaim(id string) {
	h.t.Helper()
	h.ok(h.s().CSIVolumeClaims(h.next(), []*structs.CSIVolumeClaimRequest{{Namespace: ns, VolumeID: id,
		Claim: &structs.CSIVolumeClaim{Mode: structs.CSIVolumeClaimGC}}}))
}

// finish marks a terminal on its client.
func (h *harness) finish(a *structs.Allocation) {
	h.t.Helper()
	h.ok(h.s().UpdateAllocsFromClient(h.next(), []*structs.Allocation{{ID: a.ID, ClientStatus: structs.AllocClientStatusComplete}}))
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

// waitPasses waits for the workers to make n more passes than before.
func (h *harness) waitPasses(before uint64, n uint64) {
	h.t.Helper()
	waitFor(h.t, "worker passes", func() bool { return h.w.passes.Load() >= before+n })
}

func (h *harness) hasWorker(id string) bool {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if h.w.run == nil {
		return false
	}
	_, ok := h.w.run.workers[volKey{ns, id}]
	return ok
}

// freed reports whether alloc holds no claim of any kind on volume id.
func (h *harness) freed(id, allocID string) bool {
	v := h.vol(id)
	if v == nil {
		return true
	}
	_, r := v.ReadAllocs[allocID]
	_, w := v.WriteAllocs[allocID]
	return !r && !w && v.ClaimFor(allocID) == nil
}

type call struct {
	ns, vol string
	claim   *structs.CSIVolumeClaim
	at      time.Time
}

// fakeUnpublisher records calls; it fails while fail > 0 (counting down,
// or forever when fail < 0), else frees the claim in the state store.
type fakeUnpublisher struct {
	h     *harness
	mu    sync.Mutex
	calls []call
	fail  int
	// failWith is the error of a failing call (errUnpublish when nil).
	failWith error
	// batches are the allocation IDs of each UnpublishClaims call.
	batches [][]string
}

var errUnpublish = errors.New("controller unreachable")

func (f *fakeUnpublisher) UnpublishClaim(ctx context.Context, namespace, volumeID string, claim *structs.CSIVolumeClaim) error {
	f.mu.Lock()
	f.calls = append(f.calls, call{namespace, volumeID, claim.Copy(), time.Now()})
	failing, failWith := f.fail != 0, f.failWith
	if f.fail > 0 {
		f.fail--
	}
	f.mu.Unlock()
	if failing {
		if failWith != nil {
			return failWith
		}
		return errUnpublish
	}
	c := claim.Copy()
	c.State = structs.CSIVolumeClaimStateReadyToFree
	return f.h.s().CSIVolumeClaims(f.h.next(), []*structs.CSIVolumeClaimRequest{{Namespace: namespace, VolumeID: volumeID, Claim: c}})
}

func (f *fakeUnpublisher) setFail(n int) {
	f.mu.Lock()
	f.fail = n
	f.mu.Unlock()
}

func (f *fakeUnpublisher) snapshot() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// callsFor lists the allocation IDs of the calls, sorted.
func (f *fakeUnpublisher) allocs() []string {
	var out []string
	for _, c := range f.snapshot() {
		out = append(out, c.claim.AllocationID)
	}
	sort.Strings(out)
	return out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// eachClaim releases claims one at a time through one, as an Unpublisher
// of one-claim releases; a claim after ctx ended is not tried.
func eachClaim(ctx context.Context, namespace, volumeID string, claims []*structs.CSIVolumeClaim,
	one func(ctx context.Context, namespace, volumeID string, claim *structs.CSIVolumeClaim) error) []error {
	errs := make([]error, len(claims))
	for i, c := range claims {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		errs[i] = one(ctx, namespace, volumeID, c)
	}
	return errs
}

func (f *fakeUnpublisher) UnpublishClaims(ctx context.Context, namespace, volumeID string, claims []*structs.CSIVolumeClaim) []error {
	var ids []string
	for _, c := range claims {
		ids = append(ids, c.AllocationID)
	}
	f.mu.Lock()
	f.batches = append(f.batches, ids)
	f.mu.Unlock()
	return eachClaim(ctx, namespace, volumeID, claims, f.UnpublishClaim)
}

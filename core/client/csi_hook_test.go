package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/csibridge"
)

// volBridge is a healthy monolith plugin whose node calls are recorded;
// NodePublish makes the target a directory holding a file "hello".
type volBridge struct {
	log *callLog

	mu           sync.Mutex
	publishes    []csibridge.NodePublishRequest
	unstageErr   error
	ctrlPublish  []csibridge.ControllerPublishRequest
	deleteErr    error
	unpublishErr error
	validations  []csibridge.ValidateVolumeCapabilitiesRequest
	validation   *csibridge.Validation // nil: confirmed
	validateErr  error
}

func (b *volBridge) Fingerprint(context.Context, csibridge.FingerprintRequest) (*csibridge.Fingerprint, error) {
	return &csibridge.Fingerprint{PluginName: "hostpath", Version: "1", Healthy: true, HasController: true, HasNode: true,
		NodeID: "csi-node-1", ControllerCaps: csibridge.ControllerCaps{PublishUnpublish: true, CreateDelete: true},
		NodeCaps: csibridge.NodeCaps{StageUnstage: true}}, nil
}

func (b *volBridge) ControllerPublish(_ context.Context, req csibridge.ControllerPublishRequest) (map[string]string, error) {
	b.mu.Lock()
	b.ctrlPublish = append(b.ctrlPublish, req)
	b.mu.Unlock()
	return map[string]string{"device": "/dev/vdb"}, nil
}
func (b *volBridge) ControllerUnpublish(context.Context, csibridge.ControllerUnpublishRequest) error {
	return nil
}
func (b *volBridge) NodeStage(_ context.Context, req csibridge.NodeStageRequest) error {
	b.log.add("stage %s %s", req.VolumeID, req.StagingPath)
	return nil
}
func (b *volBridge) NodeUnstage(_ context.Context, req csibridge.NodeUnstageRequest) error {
	b.log.add("unstage %s %s", req.VolumeID, req.StagingPath)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unstageErr
}
func (b *volBridge) NodePublish(_ context.Context, req csibridge.NodePublishRequest) error {
	b.log.add("publish %s %s", req.VolumeID, req.TargetPath)
	b.mu.Lock()
	b.publishes = append(b.publishes, req)
	b.mu.Unlock()
	if err := os.MkdirAll(req.TargetPath, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(req.TargetPath, "hello"), []byte("hi"), 0o644)
}
func (b *volBridge) NodeUnpublish(_ context.Context, req csibridge.NodeUnpublishRequest) error {
	b.log.add("unpublish %s %s", req.VolumeID, req.TargetPath)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unpublishErr != nil {
		return b.unpublishErr
	}
	return os.RemoveAll(req.TargetPath)
}
func (b *volBridge) CreateVolume(context.Context, csibridge.CreateVolumeRequest) (*csibridge.CreatedVolume, error) {
	return &csibridge.CreatedVolume{ExternalID: "new"}, nil
}
func (b *volBridge) DeleteVolume(context.Context, csibridge.DeleteVolumeRequest) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.deleteErr
}
func (b *volBridge) ValidateVolumeCapabilities(_ context.Context, req csibridge.ValidateVolumeCapabilitiesRequest) (*csibridge.Validation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.validations = append(b.validations, req)
	if b.validateErr != nil {
		return nil, b.validateErr
	}
	if b.validation != nil {
		v := *b.validation
		return &v, nil
	}
	return &csibridge.Validation{Confirmed: true}, nil
}

type volHarness struct {
	t      *testing.T
	srv    *fakeServer
	bridge *volBridge
	cb     csibridge.Bridge // what the client calls: bridge, or a wrap of it
	world  *fakeWorld
	log    *callLog
	c      *Client
	state  string
}

// newVolHarness starts a client running the healthy plugin "hp".
func newVolHarness(t *testing.T) *volHarness {
	t.Helper()
	return newVolHarnessWith(t, nil)
}

// newVolHarnessWith is newVolHarness with wrap(the fake bridge) as the
// client's bridge; a nil wrap uses the fake bridge itself.
func newVolHarnessWith(t *testing.T, wrap func(*volBridge) csibridge.Bridge) *volHarness {
	t.Helper()
	return newVolHarnessOf(t, wrap, structs.CSIPluginTypeMonolith)
}

// newVolHarnessOf is newVolHarnessWith with a plugin of type typ.
func newVolHarnessOf(t *testing.T, wrap func(*volBridge) csibridge.Bridge, typ structs.CSIPluginType) *volHarness {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	log := &callLog{}
	srv := newFakeServer()
	srv.csi.log = log
	srv.csi.vols = map[string]*structs.CSIVolume{
		"vol": {ID: "vol", Namespace: "default", PluginID: "hp", ExternalID: "ext-vol", Secrets: map[string]string{"k": "s"}},
	}
	srv.csi.opsCh = make(chan []*structs.CSIControllerOp, 1)
	bridge := &volBridge{log: log}
	var cb csibridge.Bridge = bridge
	if wrap != nil {
		cb = wrap(bridge)
	}
	state := t.TempDir()
	world := newFakeWorld()
	c := startVolClient(t, srv, cb, world, state)
	task := fakeTaskSpec("plugin", `{}`)
	task.CSIPluginConfig = &structs.TaskCSIPluginConfig{ID: "hp", Type: typ, HealthTimeout: time.Minute}
	pa := testAlloc("plugin-alloc-0001", c.NodeID(), testJob("system", task))
	srv.upsert(pa)
	waitFor(t, "plugin healthy", func() bool {
		_, nodes := c.rcfg.CSI.NodePlugins()
		return nodes["hp"] != nil && nodes["hp"].Healthy
	})
	return &volHarness{t: t, srv: srv, bridge: bridge, cb: cb, world: world, log: log, c: c, state: state}
}

// startVolClient starts a client over srv, bridge and world with its
// state in state, with the volume hook's timings shortened.
func startVolClient(t *testing.T, srv *fakeServer, bridge csibridge.Bridge, world *fakeWorld, state string) *Client {
	t.Helper()
	c, err := New(Config{
		StateDir: state, Server: srv, Drivers: fakeProvider{"fake": newFakeDriver(world)}, CSIBridge: bridge,
		UpdateBatchInterval: 5 * time.Millisecond, RetryInterval: 5 * time.Millisecond, MaxRetryInterval: 20 * time.Millisecond,
		FingerprintInterval: -1, CSIProbeInterval: 5 * time.Millisecond, CSIHealthInterval: time.Hour,
		CSIRetryInterval: 5 * time.Millisecond, CSIMaxRetryInterval: 20 * time.Millisecond, CSIPluginWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// volAlloc is an alloc of a job with volume "data" (source vol) mounted
// by task app at /srv.
func (h *volHarness) volAlloc(id string, readOnly bool) *structs.Allocation {
	task := fakeTaskSpec("app", `{}`)
	task.VolumeMounts = []*structs.VolumeMount{{Volume: "data", Destination: "/srv", ReadOnly: readOnly}}
	job := testJob("service", task)
	job.ID = "job-" + id
	req := &structs.VolumeRequest{Name: "data", Type: structs.VolumeTypeCSI, Source: "vol",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
	if readOnly {
		req.ReadOnly, req.AccessMode = true, structs.CSIVolumeAccessModeMultiNodeReader
	}
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": req}
	a := testAlloc(id, h.c.NodeID(), job)
	return a
}

func (h *volHarness) has(call string) bool { return slices.Contains(h.log.snapshot(), call) }

func (h *volHarness) indexOf(call string) int { return slices.Index(h.log.snapshot(), call) }

func isMounted(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// Claim (retried past ErrUnavailable) → stage → publish at Nomad's paths,
// the volume bind-mounted into the task; a stop releases it:
// unpublish → unstage → UnpublishVolume(node-detached).
func TestCSIVolumeClaimPublishRelease(t *testing.T) {
	h := newVolHarness(t)
	h.srv.csi.mu.Lock()
	h.srv.csi.claimErrs = []error{structs.NewError(structs.ErrUnavailable, "no servers")}
	h.srv.csi.mu.Unlock()
	a := h.volAlloc("alloc-aaaa-0001", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })

	root := filepath.Join(h.state, "csi", "node", "hp")
	usage := "rw-file-system-single-node-writer"
	staging := filepath.Join(root, "staging", a.Namespace, "vol", usage)
	target := filepath.Join(root, "per-alloc", a.ID, "vol", usage)
	calls := h.log.snapshot()
	want := []string{"claim-error vol", "claim vol write", "stage ext-vol " + staging, "publish ext-vol " + target}
	if !slices.Equal(calls[:min(len(calls), 4)], want) {
		t.Fatalf("calls = %q, want %q", calls, want)
	}
	h.srv.csi.mu.Lock()
	claim := h.srv.csi.claims[1]
	h.srv.csi.mu.Unlock()
	if claim.NodeID != h.c.NodeID() || claim.AllocationID != a.ID || claim.Namespace != a.Namespace ||
		claim.AccessMode != structs.CSIVolumeAccessModeSingleNodeWriter || claim.AttachmentMode != structs.CSIVolumeAttachmentModeFilesystem {
		t.Errorf("claim args: %+v", claim)
	}
	h.bridge.mu.Lock()
	pub := h.bridge.publishes[0]
	h.bridge.mu.Unlock()
	if pub.StagingPath != staging || pub.ReadOnly || pub.PublishContext["dev"] != "x" || pub.Secrets["k"] != "s" {
		t.Errorf("publish request: %+v", pub)
	}
	bind := filepath.Join(h.c.cfg.AllocDir, a.ID, "app", "srv")
	if b, err := os.ReadFile(filepath.Join(bind, "hello")); err != nil || string(b) != "hi" {
		t.Fatalf("the volume is not visible in the task dir: %v", err)
	}

	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	rel := "release vol " + a.ID + " node-detached"
	waitFor(t, "claim released", func() bool { return h.has(rel) })
	up, us := h.indexOf("unpublish ext-vol "+target), h.indexOf("unstage ext-vol "+staging)
	if up < 0 || us < up || h.indexOf(rel) < us {
		t.Fatalf("release order: %q", h.log.snapshot())
	}
	if isMounted(t, bind) {
		t.Error("task bind mount left behind")
	}
}

// A read-only volume is claimed for reading and published and mounted
// read-only.
func TestCSIVolumeReadOnly(t *testing.T) {
	h := newVolHarness(t)
	a := h.volAlloc("alloc-bbbb-0001", true)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	if !h.has("claim vol read") {
		t.Fatalf("calls: %q", h.log.snapshot())
	}
	h.bridge.mu.Lock()
	pub := h.bridge.publishes[0]
	h.bridge.mu.Unlock()
	if !pub.ReadOnly || !strings.HasSuffix(pub.TargetPath, "/ro-file-system-multi-node-reader-only") {
		t.Errorf("publish: %+v", pub)
	}
	bind := filepath.Join(h.c.cfg.AllocDir, a.ID, "app", "srv")
	err := os.WriteFile(filepath.Join(bind, "new"), []byte("x"), 0o644)
	if !errors.Is(err, unix.EROFS) {
		t.Errorf("write into the read-only mount: %v", err)
	}
	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "claim released", func() bool { return h.has("release vol " + a.ID + " node-detached") })
}

// A claim refused for good fails the alloc with a setup failure naming
// the volume and the cause.
func TestCSIVolumeClaimFatal(t *testing.T) {
	h := newVolHarness(t)
	h.srv.csi.mu.Lock()
	h.srv.csi.claimErrs = []error{structs.NewError(structs.ErrPermissionDenied, "Permission denied")}
	h.srv.csi.mu.Unlock()
	a := h.volAlloc("alloc-cccc-0001", false)
	h.srv.upsert(a)
	waitFor(t, "alloc failed", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusFailed })
	st := h.srv.alloc(a.ID).TaskStates["app"]
	found := false
	for _, ev := range st.Events {
		if ev.Type == structs.TaskSetupFailure && strings.Contains(ev.SetupError, `volume "data"`) && strings.Contains(ev.SetupError, "Permission denied") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no setup failure naming the volume: %+v", st.Events)
	}
	if h.has("publish ext-vol") || slices.ContainsFunc(h.log.snapshot(), func(s string) bool { return strings.HasPrefix(s, "stage") }) {
		t.Errorf("mounted after a failed claim: %q", h.log.snapshot())
	}
}

// Two allocs sharing a staging target: it is unstaged only after the
// last; an unstage answering NotFound counts as done.
func TestCSIVolumeSharedStaging(t *testing.T) {
	h := newVolHarness(t)
	h.bridge.unstageErr = errors.Join(csibridge.ErrNotFound, errors.New("gone"))
	a1, a2 := h.volAlloc("alloc-dddd-0001", false), h.volAlloc("alloc-dddd-0002", false)
	h.srv.upsert(a1)
	h.srv.upsert(a2)
	waitFor(t, "allocs running", func() bool {
		return h.srv.clientStatus(a1.ID) == structs.AllocClientStatusRunning && h.srv.clientStatus(a2.ID) == structs.AllocClientStatusRunning
	})
	countPrefix := func(p string) int {
		n := 0
		for _, c := range h.log.snapshot() {
			if strings.HasPrefix(c, p) {
				n++
			}
		}
		return n
	}
	h.srv.setDesired(a1.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "first released", func() bool { return h.has("release vol " + a1.ID + " node-detached") })
	if n := countPrefix("unstage "); n != 0 {
		t.Fatalf("unstaged while another alloc uses it: %q", h.log.snapshot())
	}
	h.srv.setDesired(a2.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "second released", func() bool { return h.has("release vol " + a2.ID + " node-detached") })
	if n := countPrefix("unstage "); n != 1 {
		t.Fatalf("unstages = %d: %q", n, h.log.snapshot())
	}
}

// The controller executor runs a publish op and reports its publish
// context, and reports a failed op's error kind.
func TestCSIControllerExecutor(t *testing.T) {
	h := newVolHarness(t)
	h.bridge.mu.Lock()
	h.bridge.deleteErr = errors.Join(csibridge.ErrUnavailable, errors.New("busy"))
	h.bridge.mu.Unlock()
	h.srv.csi.opsCh <- []*structs.CSIControllerOp{
		{ID: "op1", Kind: structs.CSIControllerOpPublish, PluginID: "hp", ExternalVolumeID: "ext-vol", ExternalNodeID: "csi-node-1",
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
		{ID: "op2", Kind: structs.CSIControllerOpDelete, PluginID: "hp", ExternalVolumeID: "ext-vol"},
		{ID: "op3", Kind: structs.CSIControllerOpPublish, PluginID: "nope"},
	}
	var done *structs.CSIControllerDoneArgs
	waitFor(t, "results reported", func() bool {
		h.srv.csi.mu.Lock()
		defer h.srv.csi.mu.Unlock()
		if len(h.srv.csi.done) > 0 {
			done = h.srv.csi.done[0]
		}
		return done != nil
	})
	if len(done.Results) != 3 {
		t.Fatalf("results: %+v", done.Results)
	}
	r1, r2, r3 := done.Results[0], done.Results[1], done.Results[2]
	if r1.ID != "op1" || r1.ErrorKind != "" || r1.PublishContext["device"] != "/dev/vdb" {
		t.Errorf("publish result: %+v", r1)
	}
	if r2.ID != "op2" || r2.ErrorKind != "unavailable" || !strings.Contains(r2.Error, "busy") {
		t.Errorf("delete result: %+v", r2)
	}
	if r3.ErrorKind != "unavailable" || !strings.Contains(r3.Error, `"nope"`) {
		t.Errorf("unknown plugin result: %+v", r3)
	}
	h.bridge.mu.Lock()
	defer h.bridge.mu.Unlock()
	if len(h.bridge.ctrlPublish) != 1 || h.bridge.ctrlPublish[0].NodeID != "csi-node-1" || h.bridge.ctrlPublish[0].VolumeID != "ext-vol" {
		t.Errorf("controller publish: %+v", h.bridge.ctrlPublish)
	}
}

// Validate ops reach the bridge with every capability (mount options on
// file-system ones only), the parameters, context and secrets; the
// driver's refusal is an answer, not an op error; a driver (or bridge)
// without the call is answered as unsupported; a volume the driver does
// not know keeps its kind.
func TestCSIControllerExecutorValidate(t *testing.T) {
	h := newVolHarness(t)
	op := func(id string) *structs.CSIControllerOp {
		return &structs.CSIControllerOp{ID: id, Kind: structs.CSIControllerOpValidate, PluginID: "hp", ExternalVolumeID: "ext-vol",
			Capabilities: []*structs.CSIVolumeCapability{
				{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
				{AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice}},
			MountOptions: &structs.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}},
			Parameters:   map[string]string{"type": "ssd"}, VolumeContext: map[string]string{"share": "/x"},
			Secrets: map[string]string{"token": "s3cret"}}
	}
	steps := []struct {
		name  string
		setup func(b *volBridge)
		check func(t *testing.T, r *structs.CSIControllerOpResult)
	}{
		{"confirmed", func(*volBridge) {}, func(t *testing.T, r *structs.CSIControllerOpResult) {
			if r.ErrorKind != "" || r.Validation == nil || !r.Validation.Confirmed || r.Validation.Unsupported {
				t.Errorf("result: %+v %+v", r, r.Validation)
			}
		}},
		{"refused", func(b *volBridge) {
			b.validation = &csibridge.Validation{Message: "block access is not supported"}
		}, func(t *testing.T, r *structs.CSIControllerOpResult) {
			if r.ErrorKind != "" || r.Validation == nil || r.Validation.Confirmed || r.Validation.Message != "block access is not supported" {
				t.Errorf("result: %+v %+v", r, r.Validation)
			}
		}},
		{"unimplemented", func(b *volBridge) {
			b.validation, b.validateErr = nil, fmt.Errorf("%w: csi ValidateVolumeCapabilities", csibridge.ErrUnimplemented)
		}, func(t *testing.T, r *structs.CSIControllerOpResult) {
			if r.ErrorKind != "" || r.Validation == nil || !r.Validation.Unsupported || r.Validation.Confirmed {
				t.Errorf("result: %+v %+v", r, r.Validation)
			}
		}},
		{"bridge without the RPC", func(b *volBridge) {
			b.validateErr = status.Error(codes.Unimplemented, "unknown method ValidateVolumeCapabilities")
		}, func(t *testing.T, r *structs.CSIControllerOpResult) {
			if r.ErrorKind != "" || r.Validation == nil || !r.Validation.Unsupported {
				t.Errorf("result: %+v %+v", r, r.Validation)
			}
		}},
		{"unknown volume", func(b *volBridge) {
			b.validateErr = fmt.Errorf("%w: volume ext-vol does not exist", csibridge.ErrNotFound)
		}, func(t *testing.T, r *structs.CSIControllerOpResult) {
			if r.ErrorKind != "not_found" || !strings.Contains(r.Error, "ext-vol does not exist") || r.Validation != nil {
				t.Errorf("result: %+v", r)
			}
		}},
	}
	for i, st := range steps {
		h.bridge.mu.Lock()
		st.setup(h.bridge)
		h.bridge.mu.Unlock()
		id := fmt.Sprintf("v%d", i)
		h.srv.csi.opsCh <- []*structs.CSIControllerOp{op(id)}
		var r *structs.CSIControllerOpResult
		waitFor(t, st.name+" reported", func() bool {
			h.srv.csi.mu.Lock()
			defer h.srv.csi.mu.Unlock()
			for _, d := range h.srv.csi.done {
				for _, res := range d.Results {
					if res.ID == id {
						r = res
					}
				}
			}
			return r != nil
		})
		st.check(t, r)
	}
	h.bridge.mu.Lock()
	defer h.bridge.mu.Unlock()
	if len(h.bridge.validations) != len(steps) {
		t.Fatalf("%d validations reached the bridge, want %d", len(h.bridge.validations), len(steps))
	}
	got := h.bridge.validations[0]
	want := []csibridge.Capability{
		{AccessMode: "single-node-writer", AttachmentMode: "file-system", FSType: "ext4", MountFlags: []string{"noatime"}},
		{AccessMode: "multi-node-reader-only", AttachmentMode: "block-device"},
	}
	if got.VolumeID != "ext-vol" || !reflect.DeepEqual(got.Capabilities, want) || got.Parameters["type"] != "ssd" ||
		got.VolumeContext["share"] != "/x" || got.Secrets["token"] != "s3cret" || got.Socket == "" {
		t.Errorf("validate request: %+v", got)
	}
}

// A failed unpublish releases the claim as unpublishing at once and is
// retried in the background until it passes, then released as
// node-detached.
func TestCSIVolumeReleaseRetry(t *testing.T) {
	h := newVolHarness(t)
	a := h.volAlloc("alloc-eeee-0001", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	h.bridge.mu.Lock()
	h.bridge.unpublishErr = errors.Join(csibridge.ErrFailedPrecondition, errors.New("busy"))
	h.bridge.mu.Unlock()
	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	waitFor(t, "released as unpublishing", func() bool { return h.has("release vol " + a.ID + " unpublishing") })
	if h.has("release vol " + a.ID + " node-detached") {
		t.Fatal("node-detached before the node steps passed")
	}
	h.bridge.mu.Lock()
	h.bridge.unpublishErr = nil
	h.bridge.mu.Unlock()
	waitFor(t, "released as node-detached", func() bool { return h.has("release vol " + a.ID + " node-detached") })
	if !slices.ContainsFunc(h.log.snapshot(), func(s string) bool { return strings.HasPrefix(s, "unstage ext-vol") }) {
		t.Errorf("not unstaged: %q", h.log.snapshot())
	}
}

// A node-detached report the servers cannot take now (no leader, the
// leader unreachable) is sent again until it passes: while the node
// lives, nothing else moves the claim on. The volume stays in the alloc's
// state until then.
func TestCSIVolumeReleaseRetriedPastNoLeader(t *testing.T) {
	h := newVolHarness(t)
	a := h.volAlloc("alloc-rrrr-0001", false)
	h.srv.upsert(a)
	waitFor(t, "alloc running", func() bool { return h.srv.clientStatus(a.ID) == structs.AllocClientStatusRunning })
	h.srv.csi.mu.Lock()
	h.srv.csi.releaseErrs = []error{structs.NewError(structs.ErrNoLeader, "No cluster leader"),
		structs.NewError(structs.ErrUnavailable, "connection refused")}
	h.srv.csi.mu.Unlock()

	h.srv.setDesired(a.ID, structs.AllocDesiredStatusStop)
	failed, rel := "release-error vol "+a.ID+" node-detached", "release vol "+a.ID+" node-detached"
	waitFor(t, "the release sent again until it passed", func() bool { return h.has(rel) })
	calls := h.log.snapshot()
	if n := slices.Index(calls, rel); n < 2 || calls[n-1] != failed || calls[n-2] != failed {
		t.Fatalf("calls: %q; want two failed node-detached reports, then one that passed", calls)
	}
	waitFor(t, "the volume forgotten once released", func() bool {
		ar := h.c.runner(a.ID)
		return ar == nil || !hasVolume(ar, "data")
	})
}

// hasVolume reports whether the alloc runner still holds volume alias in
// its state (a release not reported yet).
func hasVolume(ar *allocRunner, alias string) bool {
	for _, m := range ar.vols.Snapshot() {
		if m.Alias == alias {
			return true
		}
	}
	return false
}

package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/server/gcengine"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/gc"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// gcRouter hands out one collector for every collection, or an error.
type gcRouter struct {
	mu    sync.Mutex
	col   sdkgc.Collector
	err   error
	calls atomic.Int64
}

func (r *gcRouter) Collector(gcpb.Collection) (sdkgc.Collector, error) {
	r.calls.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.col, r.err
}

func (r *gcRouter) set(col sdkgc.Collector, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.col, r.err = col, err
}

// hookCollector runs before for each page, then the default plugin, and
// counts pages.
type hookCollector struct {
	before func(req *gcpb.DecideRequest)
	pages  atomic.Int64
}

func (h *hookCollector) Info(ctx context.Context) (*gcpb.InfoResponse, error) {
	return gc.New().Info(ctx)
}

func (h *hookCollector) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	h.pages.Add(1)
	if h.before != nil {
		h.before(req)
	}
	return gc.New().Decide(ctx, req)
}

// gcServer is a dev server whose GC is the default plugin, in process,
// with short pauses and jobs that run only when forced (long intervals).
func gcServer(t *testing.T, col sdkgc.Collector, mut func(*Config)) (*Server, *gcRouter) {
	t.Helper()
	r := &gcRouter{col: col}
	skew := new(atomic.Int64)
	s := testServer(t, func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
		c.GC = r
		c.GCConfig = GCConfig{JobGCInterval: time.Hour, CSIVolumeClaimGCInterval: time.Hour}
		c.gcPacing = &gcengine.Pacing{MinPause: time.Microsecond, MaxPause: time.Millisecond}
		if mut != nil {
			mut(c)
		}
	})
	gcSkews.Store(s, skew)
	t.Cleanup(func() { gcSkews.Delete(s) })
	return s, r
}

// gcSkews holds the clock offset of each gcServer: forceGC moves it past
// sdk/gc.ForceThreshold, so what a test wrote just before counts as old
// however fast the machine (a server whose test set its own clock has
// none).
var gcSkews sync.Map // *Server → *atomic.Int64

// agePastForce moves a gcServer's clock past sdk/gc.ForceThreshold.
func agePastForce(s *Server) {
	if skew, ok := gcSkews.Load(s); ok {
		skew.(*atomic.Int64).Add(int64(2 * sdkgc.ForceThreshold))
	}
}

func forceGC(t *testing.T, s *Server) {
	t.Helper()
	agePastForce(s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.ForceGC(ctx); err != nil {
		t.Fatalf("ForceGC: %v", err)
	}
}

func TestGCForceReapsFinishedJobWithItsEvalsAndAllocs(t *testing.T) {
	s, _ := gcServer(t, gc.New(), nil)
	a := testNode("a")
	registerNodes(t, s, a)
	alloc := runJobOn(t, s, testJob("done", "sysbatch"), a, structs.AllocClientStatusComplete)
	waitFor(t, 5*time.Second, "job dead", func() bool { return jobStatus(s, "done") == structs.JobStatusDead })
	evals, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, "done")
	if len(evals) == 0 {
		t.Fatal("no evals")
	}

	forceGC(t, s)
	if j, _ := s.State().JobByID(nil, structs.DefaultNamespace, "done"); j != nil {
		t.Error("dead job kept")
	}
	if got, _ := s.State().AllocByID(nil, alloc.ID); got != nil {
		t.Error("alloc kept")
	}
	for _, e := range evals {
		if got, _ := s.State().EvalByID(nil, e.ID); got != nil {
			t.Errorf("eval %s kept", e.ID)
		}
	}
	if n, _ := s.State().NodeByID(nil, a.ID); n == nil {
		t.Error("ready node reaped")
	}
}

func TestGCKeepsDesiredStopAllocStillRunning(t *testing.T) {
	s, _ := gcServer(t, gc.New(), nil)
	ctx := context.Background()
	a := testNode("a")
	registerNodes(t, s, a)
	alloc := runJobOn(t, s, testJob("svc", "system"), a, structs.AllocClientStatusRunning)
	resp, err := s.Jobs().Deregister(ctx, structs.DefaultNamespace, "svc", false)
	if err != nil {
		t.Fatal(err)
	}
	waitEvalTerminal(t, s, resp.EvalID)
	waitFor(t, 5*time.Second, "alloc desired stop", func() bool {
		got, _ := s.State().AllocByID(nil, alloc.ID)
		return got != nil && got.DesiredStatus == structs.AllocDesiredStatusStop
	})

	forceGC(t, s)
	if got, _ := s.State().AllocByID(nil, alloc.ID); got == nil {
		t.Fatal("a desired-stop alloc still running on its client was reaped")
	}
	if j, _ := s.State().JobByID(nil, structs.DefaultNamespace, "svc"); j == nil {
		t.Fatal("a stopped job with a running alloc was reaped")
	}

	// Once the client reports it stopped, the job goes with it.
	u := alloc.Copy()
	u.ClientStatus = structs.AllocClientStatusComplete
	if err := s.Nodes().UpdateAllocs(ctx, a.ID, a.SecretID, []*structs.Allocation{u}); err != nil {
		t.Fatal(err)
	}
	forceGC(t, s)
	if got, _ := s.State().AllocByID(nil, alloc.ID); got != nil {
		t.Error("stopped alloc kept")
	}
	if j, _ := s.State().JobByID(nil, structs.DefaultNamespace, "svc"); j != nil {
		t.Error("stopped job kept")
	}
}

func TestGCReapsDownNodeAndEmptyCSIPlugin(t *testing.T) {
	s, _ := gcServer(t, gc.New(), nil)
	ctx := context.Background()
	down, ready := testNode("down"), testNode("ready")
	registerNodes(t, s, down, ready)
	if _, err := s.raftApply(structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{
		NodeID: down.ID, Status: structs.NodeStatusDown, UpdatedAt: s.cfg.Now().Unix() - 1,
	}); err != nil {
		t.Fatal(err)
	}

	// A plugin whose only node stopped reporting it, with a volume: in use,
	// kept without an error; without the volume, reaped.
	pn := csiNode("p", "hp", true)
	registerNodes(t, s, pn)
	if _, err := s.CSI().RegisterCSIVolumes(ctx, []*structs.CSIVolume{csiVol("v1", "hp")}); err != nil {
		t.Fatal(err)
	}
	pn.CSINodePlugins = nil
	registerNodes(t, s, pn)
	if p, _ := s.State().CSIPluginByID(nil, "hp"); p == nil || !p.IsEmpty() {
		t.Fatalf("plugin %+v, want empty", p)
	}

	forceGC(t, s)
	if n, _ := s.State().NodeByID(nil, down.ID); n != nil {
		t.Error("down node kept")
	}
	if n, _ := s.State().NodeByID(nil, ready.ID); n == nil {
		t.Error("ready node reaped")
	}
	if p, _ := s.State().CSIPluginByID(nil, "hp"); p == nil {
		t.Fatal("plugin with a volume reaped")
	}
	if _, err := s.CSI().DeregisterCSIVolumes(ctx, structs.DefaultNamespace, []string{"v1"}, false); err != nil {
		t.Fatal(err)
	}
	forceGC(t, s)
	if p, _ := s.State().CSIPluginByID(nil, "hp"); p != nil {
		t.Error("empty plugin kept")
	}
}

// An object that changes between its page and the apply is not deleted:
// the job registered again while the plugin decides.
func TestGCRecheckKeepsObjectModifiedSincePage(t *testing.T) {
	var s *Server
	var once sync.Once
	h := &hookCollector{before: func(req *gcpb.DecideRequest) {
		if len(req.GetJobs()) == 0 {
			return
		}
		once.Do(func() {
			j := testJob("done", "sysbatch")
			if _, err := s.Jobs().Register(context.Background(), j, false, 0); err != nil {
				t.Error(err)
			}
		})
	}}
	s, _ = gcServer(t, h, nil)
	a := testNode("a")
	registerNodes(t, s, a)
	runJobOn(t, s, testJob("done", "sysbatch"), a, structs.AllocClientStatusComplete)
	waitFor(t, 5*time.Second, "job dead", func() bool { return jobStatus(s, "done") == structs.JobStatusDead })
	before, _ := s.State().JobByID(nil, structs.DefaultNamespace, "done")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	agePastForce(s)
	if err := (collector{s}).run(ctx, []string{"job-gc"}, true); err != nil {
		t.Fatal(err)
	}
	j, _ := s.State().JobByID(nil, structs.DefaultNamespace, "done")
	if j == nil || j.ModifyIndex == before.ModifyIndex {
		t.Fatalf("job re-registered during the decision was purged (job %+v)", j)
	}
}

// More objects than one page and one entry: all are reaped, over several.
func TestGCBatchesLargeBacklog(t *testing.T) {
	for _, tc := range []struct {
		name string
		// idle: the cluster counts idle at once (Pacing.IdleAfter), so
		// entries are pipelined through Raft two at a time and pages
		// decided ahead.
		idle bool
	}{
		{name: "busy pacing"},
		{name: "idle: pipelined", idle: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hookCollector{}
			s, _ := gcServer(t, h, func(c *Config) {
				c.gcPacing.BatchObjects = 4
				c.gcPacing.Limits = gcengine.Limits{Candidates: 7, Objects: 100}
				if tc.idle {
					c.gcPacing.IdleAfter = time.Nanosecond
					c.gcPacing.IdleInFlight = 2
				}
			})
			var evals []*structs.Evaluation
			for i := 0; i < 30; i++ {
				evals = append(evals, &structs.Evaluation{ID: uuid.NewString(), Namespace: structs.DefaultNamespace, JobID: "gone",
					Type: "sysbatch", Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete})
			}
			if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals}); err != nil {
				t.Fatal(err)
			}
			before := s.State().LatestIndex()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			agePastForce(s)
			if err := (collector{s}).run(ctx, []string{"eval-gc"}, true); err != nil {
				t.Fatal(err)
			}
			left, _ := s.State().Evals(nil)
			if len(left) != 0 {
				t.Fatalf("%d evals left", len(left))
			}
			if p := h.pages.Load(); p != 5 {
				t.Errorf("%d pages, want 5 (30 evals, 7 a page)", p)
			}
			// 5 pages of at most 7 evals, 4 to an entry: 2 entries a page.
			if n := s.State().LatestIndex() - before; n < 8 {
				t.Errorf("%d Raft entries for 30 evals in batches of 4, want at least 8", n)
			}
		})
	}
}

// warnCounter counts warnings and errors a server logs.
type warnCounter struct {
	t *testing.T
	n atomic.Int64
}

func (w *warnCounter) Write(p []byte) (int, error) {
	if s := string(p); (strings.Contains(s, "[WARN]") || strings.Contains(s, "[ERROR]")) && strings.Contains(s, "garbage") {
		w.n.Add(1)
		w.t.Log(s)
	}
	return len(p), nil
}

// An unavailable plugin keeps everything, quietly, run after run; force
// GC says so with the kind.
func TestGCPluginUnavailableKeepsEverything(t *testing.T) {
	warns := &warnCounter{t: t}
	s, r := gcServer(t, nil, func(c *Config) {
		c.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: warns})
		c.GCConfig.JobGCInterval = 2 * time.Millisecond
	})
	r.set(nil, structs.NewError(structs.ErrUnavailable, "gc plugin restarting"))
	a := testNode("a")
	registerNodes(t, s, a)
	alloc := runJobOn(t, s, testJob("done", "sysbatch"), a, structs.AllocClientStatusComplete)
	waitFor(t, 5*time.Second, "job dead", func() bool { return jobStatus(s, "done") == structs.JobStatusDead })

	if err := s.ForceGC(context.Background()); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("ForceGC with the plugin unavailable: %v, want ErrUnavailable", err)
	}
	start := r.calls.Load()
	waitFor(t, 10*time.Second, "periodic runs", func() bool { return r.calls.Load() > start+50 })
	if got, _ := s.State().AllocByID(nil, alloc.ID); got == nil {
		t.Fatal("alloc reaped without a plugin")
	}
	if n := warns.n.Load(); n != 0 {
		t.Errorf("%d warnings for an unavailable plugin", n)
	}

	// Back: the next run collects.
	r.set(gc.New(), nil)
	forceGC(t, s)
	if got, _ := s.State().AllocByID(nil, alloc.ID); got != nil {
		t.Error("alloc kept once the plugin is back")
	}
}

func TestGCWithoutPlugin(t *testing.T) {
	s := testServer(t, nil)
	if err := s.ForceGC(context.Background()); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("ForceGC without a GC plugin: %v", err)
	}
	s.leaderMu.Lock()
	g := s.gc
	s.leaderMu.Unlock()
	if g != nil {
		t.Error("a GC engine runs without a plugin")
	}
}

// The periodic jobs collect on their own, with the thresholds in force.
func TestGCPeriodicEvalGCHonoursThreshold(t *testing.T) {
	clock := newTestClock()
	s, _ := gcServer(t, gc.New(), func(c *Config) {
		c.Now = clock.Now
		c.GCConfig.JobGCInterval = 5 * time.Millisecond
	})
	var evals []*structs.Evaluation
	for i := 0; i < 3; i++ {
		evals = append(evals, &structs.Evaluation{ID: uuid.NewString(), Namespace: structs.DefaultNamespace, JobID: "gone",
			Type: "system", Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete})
	}
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals}); err != nil {
		t.Fatal(err)
	}
	// Within eval_gc_threshold (1h): kept, by a run that is surely after
	// the write.
	if err := (collector{s}).run(context.Background(), []string{"eval-gc"}, false); err != nil {
		t.Fatal(err)
	}
	if left, _ := s.State().Evals(nil); len(left) != 3 {
		t.Fatalf("%d evals left within the threshold", len(left))
	}
	clock.Advance(2 * time.Hour)
	waitFor(t, 10*time.Second, "old terminal evals reaped by the periodic job", func() bool {
		left, _ := s.State().Evals(nil)
		return len(left) == 0
	})
}

// A claim whose allocation finished is marked by claim GC (a GC
// pseudo-claim, to the volume's past claims); the release then completes
// as any other (node unpublish, controller detach, free).
func TestGCReleasesClaimOfTerminalAlloc(t *testing.T) {
	s, _ := gcServer(t, gc.New(), nil)
	node, alloc := csiSetup(t, s)
	startFakeController(t, s, node, func(op *structs.CSIControllerOp) *structs.CSIControllerOpResult {
		return &structs.CSIControllerOpResult{}
	})
	ctx := context.Background()
	if _, err := s.CSI().ClaimVolume(ctx, claimArgs(node, alloc)); err != nil {
		t.Fatal(err)
	}
	// Still running: the claim stays.
	u := alloc.Copy()
	u.ClientStatus = structs.AllocClientStatusRunning
	if err := s.Nodes().UpdateAllocs(ctx, node.ID, node.SecretID, []*structs.Allocation{u}); err != nil {
		t.Fatal(err)
	}
	agePastForce(s)
	if err := (collector{s}).run(ctx, []string{"csi-volume-claim-gc"}, true); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.State().CSIVolumeRaw(nil, structs.DefaultNamespace, "v1"); len(v.WriteClaims) != 1 || len(v.PastClaims) != 0 {
		t.Fatalf("claim of a running alloc released: write %v past %v", v.WriteClaims, v.PastClaims)
	}
	u.ClientStatus = structs.AllocClientStatusComplete
	if err := s.Nodes().UpdateAllocs(ctx, node.ID, node.SecretID, []*structs.Allocation{u}); err != nil {
		t.Fatal(err)
	}
	agePastForce(s)
	if err := (collector{s}).run(ctx, []string{"csi-volume-claim-gc"}, true); err != nil {
		t.Fatal(err)
	}
	v, _ := s.State().CSIVolumeRaw(nil, structs.DefaultNamespace, "v1")
	if c := v.PastClaims[alloc.ID]; c == nil || c.State != structs.CSIVolumeClaimStateUnpublishing {
		t.Fatalf("claim not marked for release: past %v", v.PastClaims)
	}
	// The watcher waits for the live node to unpublish; once it has, the
	// claim is detached through the controller and freed.
	if _, err := s.CSI().UnpublishVolume(ctx, &structs.CSIVolumeUnpublishArgs{NodeID: node.ID, SecretID: node.SecretID,
		Namespace: structs.DefaultNamespace, VolumeID: "v1",
		Claim: &structs.CSIVolumeClaim{AllocationID: alloc.ID, Mode: structs.CSIVolumeClaimWrite, State: structs.CSIVolumeClaimStateNodeDetached}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the released claim freed", func() bool {
		v, _ := s.State().CSIVolumeRaw(nil, structs.DefaultNamespace, "v1")
		return v != nil && !v.InUse()
	})
}

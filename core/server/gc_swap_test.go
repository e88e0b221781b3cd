package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/server/gcengine"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/gc"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// A GC plugin swapped (reloaded) while a collection runs: whichever way the
// old instance ends, nothing is deleted twice (no GCReap entry ever finds
// an object it names gone: Skipped stays 0) and nothing is kept for good
// (every eligible object is reaped once the new instance decides).

// swapHandle is what the agent's router hands a core job: a handle that
// calls the plugin's current instance on every page, so a reload reaches
// the pages after it.
type swapHandle struct {
	cur atomic.Pointer[sdkgc.Collector]
}

func newSwapHandle(c sdkgc.Collector) *swapHandle {
	h := &swapHandle{}
	h.swap(c)
	return h
}

func (h *swapHandle) swap(c sdkgc.Collector) { h.cur.Store(&c) }

func (h *swapHandle) Info(ctx context.Context) (*gcpb.InfoResponse, error) {
	return (*h.cur.Load()).Info(ctx)
}

func (h *swapHandle) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	return (*h.cur.Load()).Decide(ctx, req)
}

// blockingCollector is the old instance: the default plugin, but its
// second page blocks until the test has swapped it out (swapped closed),
// and then it answers with fail's error when fail is set (the old process
// was killed under the call), else its decisions (it drained the call).
type blockingCollector struct {
	fail    error
	blocked chan struct{} // closed once the second page blocks
	swapped chan struct{} // closed by the test after the swap
	pages   atomic.Int64
}

func newBlockingCollector(fail error) *blockingCollector {
	return &blockingCollector{fail: fail, blocked: make(chan struct{}), swapped: make(chan struct{})}
}

func (b *blockingCollector) Info(ctx context.Context) (*gcpb.InfoResponse, error) {
	return gc.New().Info(ctx)
}

func (b *blockingCollector) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	if b.pages.Add(1) == 2 {
		close(b.blocked)
		select {
		case <-b.swapped:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if b.fail != nil {
			return nil, b.fail
		}
	}
	return gc.New().Decide(ctx, req)
}

// offeredCollector is the new instance: the default plugin, recording
// every eval a page offers it.
type offeredCollector struct {
	mu      sync.Mutex
	offered map[string]int
}

func (o *offeredCollector) Info(ctx context.Context) (*gcpb.InfoResponse, error) {
	return gc.New().Info(ctx)
}

func (o *offeredCollector) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	o.mu.Lock()
	if o.offered == nil {
		o.offered = map[string]int{}
	}
	for _, c := range req.GetEvals() {
		o.offered[c.GetEval().GetId()]++
	}
	o.mu.Unlock()
	return gc.New().Decide(ctx, req)
}

func (o *offeredCollector) times(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.offered[id]
}

const swapEvals = 30

// swapServer is a server with swapEvals terminal evals of a job that is
// gone, in pages of 7 evals and reap entries of 4: five pages, two entries
// a page. Its GC engine's own runs are an hour apart; the test runs the
// eval-gc job itself.
func swapServer(t *testing.T, col sdkgc.Collector) (*Server, *gcRouter, *gcengine.Engine, map[string]bool) {
	t.Helper()
	s, r := gcServer(t, col, func(c *Config) {
		c.gcPacing.BatchObjects = 4
		c.gcPacing.Limits = gcengine.Limits{Candidates: 7, Objects: 100}
	})
	var evals []*structs.Evaluation
	ids := map[string]bool{}
	for range swapEvals {
		e := &structs.Evaluation{ID: uuid.NewString(), Namespace: structs.DefaultNamespace, JobID: "gone",
			Type: "sysbatch", Priority: 50, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete}
		evals = append(evals, e)
		ids[e.ID] = true
	}
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals}); err != nil {
		t.Fatal(err)
	}
	agePastForce(s) // the forced runs below find them old however fast the machine
	s.leaderMu.Lock()
	g := s.gc
	s.leaderMu.Unlock()
	if g == nil {
		t.Fatal("no GC engine on the leader")
	}
	return s, r, g, ids
}

// evalsLeft lists the test's evals still in the state.
func evalsLeft(t *testing.T, s *Server, ids map[string]bool) map[string]bool {
	t.Helper()
	left := map[string]bool{}
	all, err := s.State().Evals(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if ids[e.ID] {
			left[e.ID] = true
		}
	}
	return left
}

// collectSwapping runs eval-gc once; once the old instance's
// second page blocks, swap swaps it out and releases it.
func collectSwapping(t *testing.T, g *gcengine.Engine, old *blockingCollector, swap func()) (gcengine.Stats, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		st  gcengine.Stats
		err error
	}
	res := make(chan result, 1)
	go func() {
		st, err := g.Collect(ctx, "eval-gc", true)
		res <- result{st, err}
	}()
	select {
	case <-old.blocked:
	case r := <-res:
		t.Fatalf("the run ended before its second page: %+v %v", r.st, r.err)
	}
	swap()
	close(old.swapped)
	r := <-res
	return r.st, r.err
}

// The old instance drains its in-flight page after the reload; the pages
// after it go to the new instance. One run reaps everything, each object
// once.
func TestGCSwapOldInstanceDrains(t *testing.T) {
	old := newBlockingCollector(nil)
	handle := newSwapHandle(old)
	s, _, g, ids := swapServer(t, handle)
	nw := &offeredCollector{}

	st, err := collectSwapping(t, g, old, func() { handle.swap(nw) })
	if err != nil {
		t.Fatalf("run across the swap: %v", err)
	}
	if st.Skipped != 0 || st.Reaped != swapEvals {
		t.Errorf("run across the swap: reaped %d, skipped %d; want %d reaped, none skipped", st.Reaped, st.Skipped, swapEvals)
	}
	if left := evalsLeft(t, s, ids); len(left) != 0 {
		t.Fatalf("%d evals left after the run across the swap", len(left))
	}
	if p := old.pages.Load(); p != 2 {
		t.Errorf("the old instance decided %d pages, want 2 (up to the swap)", p)
	}
	offered := 0
	for id := range ids {
		offered += nw.times(id)
	}
	if want := swapEvals - 2*7; offered != want {
		t.Errorf("the new instance was offered %d evals, want the %d of the pages after the swap", offered, want)
	}

	// A later run finds nothing of it: nothing to reap twice.
	st, err = g.Collect(context.Background(), "eval-gc", true)
	if err != nil || st.Reaped != 0 || st.Skipped != 0 || st.Entries != 0 {
		t.Errorf("a run after everything was reaped: %+v %v, want nothing done", st, err)
	}
}

// The old instance is killed under its in-flight page: the run ends with
// the plugin unavailable, having reaped the first page only. While the
// plugin restarts the router answers unavailable and nothing changes;
// then the new instance is offered exactly what is left, each object
// once, and reaps it all.
func TestGCSwapOldInstanceKilled(t *testing.T) {
	killed := structs.NewError(structs.ErrUnavailable, "gc plugin killed by a reload")
	old := newBlockingCollector(killed)
	s, r, g, ids := swapServer(t, old)
	nw := &offeredCollector{}

	restarting := structs.NewError(structs.ErrUnavailable, "gc plugin restarting")
	st, err := collectSwapping(t, g, old, func() { r.set(nil, restarting) })
	if !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("run whose plugin was killed: %v, want ErrUnavailable", err)
	}
	if st.Skipped != 0 || st.Reaped != 7 {
		t.Errorf("run whose plugin was killed: reaped %d, skipped %d; want the first page's 7, none skipped", st.Reaped, st.Skipped)
	}
	left := evalsLeft(t, s, ids)
	if len(left) != swapEvals-7 {
		t.Fatalf("%d evals left after the first page, want %d", len(left), swapEvals-7)
	}

	// Restarting: the engine's own forced run keeps everything.
	if err := (collector{s}).run(context.Background(), []string{"eval-gc"}, true); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("run while the plugin restarts: %v, want ErrUnavailable", err)
	}
	if n := len(evalsLeft(t, s, ids)); n != len(left) {
		t.Fatalf("%d evals left while the plugin restarts, want %d", n, len(left))
	}

	r.set(nw, nil)
	st, err = g.Collect(context.Background(), "eval-gc", true)
	if err != nil {
		t.Fatalf("run with the new instance: %v", err)
	}
	if st.Skipped != 0 || st.Reaped != len(left) {
		t.Errorf("run with the new instance: reaped %d, skipped %d; want %d reaped, none skipped", st.Reaped, st.Skipped, len(left))
	}
	if n := len(evalsLeft(t, s, ids)); n != 0 {
		t.Fatalf("%d evals left after the new instance's run", n)
	}
	for id := range ids {
		want := 0
		if left[id] {
			want = 1
		}
		if got := nw.times(id); got != want {
			t.Errorf("eval %s offered %d times to the new instance, want %d (reaped before the swap: %t)", id, got, want, !left[id])
		}
	}
}

// A run of the new instance overlaps the old instance's run (as when a
// reload lands while a term's last run drains): the new run reaps what is
// left after the old one's first page; the old run's later pages, built
// from its older snapshot, then name objects already gone, and every
// GCReap entry re-checks and skips them. Each object is deleted exactly
// once over both runs.
func TestGCSwapOverlappingRuns(t *testing.T) {
	old := newBlockingCollector(nil)
	handle := newSwapHandle(old)
	s, _, g, ids := swapServer(t, handle)
	nw := &offeredCollector{}

	var second gcengine.Stats
	oldRun, err := collectSwapping(t, g, old, func() {
		handle.swap(nw)
		var err error
		if second, err = g.Collect(context.Background(), "eval-gc", true); err != nil {
			t.Errorf("the new instance's run: %v", err)
		}
	})
	if err != nil {
		t.Fatalf("the old instance's run: %v", err)
	}
	if second.Skipped != 0 || second.Reaped != swapEvals-7 {
		t.Errorf("the new instance's run: reaped %d, skipped %d; want the %d after the first page, none skipped",
			second.Reaped, second.Skipped, swapEvals-7)
	}
	if oldRun.Reaped != 7 || oldRun.Skipped != swapEvals-7 {
		t.Errorf("the old instance's run: reaped %d, skipped %d; want the first page's 7 reaped and the %d reaped meanwhile skipped",
			oldRun.Reaped, oldRun.Skipped, swapEvals-7)
	}
	if total := oldRun.Reaped + second.Reaped; total != swapEvals {
		t.Errorf("%d deletes over both runs for %d evals", total, swapEvals)
	}
	if n := len(evalsLeft(t, s, ids)); n != 0 {
		t.Fatalf("%d evals left after both runs", n)
	}
}

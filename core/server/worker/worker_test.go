package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/server/evalbroker"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTypeGate(t *testing.T) {
	g := newTypeGate()
	steps := []struct {
		name string
		do   func() bool
		want bool
	}{
		{"healthy type admits", func() bool { return g.admits("a") }, true},
		{"first enter", func() bool { return g.enter("a") }, true},
		{"healthy type admits a second", func() bool { return g.enter("a") }, true},
		{"degrade changes", func() bool { return g.setDegraded("a", true) }, true},
		{"degrade again is no change", func() bool { return g.setDegraded("a", true) }, false},
		{"degraded with holders admits none", func() bool { return g.admits("a") }, false},
		{"degraded with holders enters none", func() bool { return g.enter("a") }, false},
		{"other type unaffected", func() bool { return g.enter("b") }, true},
		{"one holder leaves", func() bool { g.leave("a"); return g.admits("a") }, false},
		{"last holder leaves", func() bool { g.leave("a"); return g.admits("a") }, true},
		{"degraded type takes one", func() bool { return g.enter("a") }, true},
		{"but not two", func() bool { return g.enter("a") }, false},
		{"recovery changes", func() bool { return g.setDegraded("a", false) }, true},
		{"recovered type admits more", func() bool { return g.enter("a") }, true},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Fatalf("%s: got %v, want %v", st.name, got, st.want)
		}
	}
}

func TestReasonLog(t *testing.T) {
	var r reasonLog
	r.set("e1", "boom")
	if got := r.take("e1"); got != "boom" {
		t.Fatalf("take = %q, want boom", got)
	}
	if got := r.take("e1"); got != "" {
		t.Fatalf("second take = %q, want empty", got)
	}
	for i := 0; i < maxReasons+1; i++ {
		r.set(fmt.Sprint(i), "x")
	}
	if n := len(r.m); n > maxReasons {
		t.Fatalf("log holds %d reasons, more than %d", n, maxReasons)
	}
}

func TestCapPlacements(t *testing.T) {
	placed := func(ids ...string) []*pb.PlacedAlloc {
		out := make([]*pb.PlacedAlloc, 0, len(ids))
		for _, id := range ids {
			out = append(out, &pb.PlacedAlloc{Id: id, TaskGroup: "web"})
		}
		return out
	}
	running := func(n int) []*pb.Allocation {
		out := make([]*pb.Allocation, n)
		for i := range out {
			out[i] = &pb.Allocation{Id: fmt.Sprint("run", i), DesiredStatus: structs.AllocDesiredStatusRun}
		}
		return out
	}
	cases := []struct {
		name            string
		perEval, perJob int
		have            int
		stops           []string
		plan            []*pb.PlacedAlloc
		queued          map[string]int32
		want            placementCap
		wantKept        int
		wantQueued      int32
		wantPreemptions int
	}{
		{name: "under both limits", perEval: 10, perJob: 100, plan: placed("a", "b"),
			want: placementCap{limit: 10, placed: 2}, wantKept: 2},
		{name: "per-eval limit drops the rest, counted queued", perEval: 2, perJob: 100, plan: placed("a", "b", "c"),
			want: placementCap{limit: 2, placed: 2, dropped: 1}, wantKept: 2, wantQueued: 1},
		{name: "reported group keeps its count", perEval: 1, perJob: 100, plan: placed("a", "b"), queued: map[string]int32{"web": 2},
			want: placementCap{limit: 1, placed: 1, dropped: 1}, wantKept: 1, wantQueued: 2},
		{name: "per-job limit counts running allocs", perEval: 10, perJob: 3, have: 2, plan: placed("a", "b"),
			want: placementCap{limit: 1, byJob: true, placed: 1, dropped: 1}, wantKept: 1, wantQueued: 1},
		{name: "stops free room under the per-job limit", perEval: 10, perJob: 3, have: 3, stops: []string{"run0", "run1"}, plan: placed("a", "b"),
			want: placementCap{limit: 2, byJob: true, placed: 2}, wantKept: 2},
		{name: "in-place updates are never limited", perEval: 1, perJob: 100,
			plan: []*pb.PlacedAlloc{{Id: "x", TaskGroup: "web", InPlace: true}, {Id: "a", TaskGroup: "web"}, {Id: "b", TaskGroup: "web"}},
			want: placementCap{limit: 1, placed: 1, dropped: 1}, wantKept: 2, wantQueued: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := New(Config{MaxAllocsPerEval: tc.perEval, MaxAllocsPerJob: tc.perJob}).newWorker(0)
			p := &pb.Plan{NodeAllocation: tc.plan}
			for _, id := range tc.stops {
				p.NodeUpdate = append(p.NodeUpdate, &pb.AllocStop{AllocId: id})
			}
			for _, pa := range tc.plan {
				p.NodePreemptions = append(p.NodePreemptions, &pb.Preemption{AllocId: "victim-" + pa.Id, PreemptedByAllocation: pa.Id})
			}
			resp := &pb.ScheduleResponse{Plan: p, QueuedAllocations: tc.queued}
			got := w.capPlacements(&pb.ScheduleRequest{Allocs: running(tc.have)}, resp)
			if got != tc.want {
				t.Fatalf("cap = %+v, want %+v", got, tc.want)
			}
			if len(p.NodeAllocation) != tc.wantKept {
				t.Fatalf("kept %d placements, want %d", len(p.NodeAllocation), tc.wantKept)
			}
			if len(p.NodePreemptions) != tc.wantKept {
				t.Fatalf("kept %d preemptions, want one per kept placement (%d)", len(p.NodePreemptions), tc.wantKept)
			}
			if q := resp.QueuedAllocations["web"]; q != tc.wantQueued {
				t.Fatalf("queued = %d, want %d", q, tc.wantQueued)
			}
		})
	}
}

// fakeBroker hands out its evals one at a time, then blocks until the
// caller's context ends; it records what the worker did with each.
type fakeBroker struct {
	mu       sync.Mutex
	evals    []*structs.Evaluation
	acked    []string
	nacked   []string
	requeued map[string]time.Duration
	done     chan struct{} // closed at the first ack, nack or requeue
	once     sync.Once
}

func newFakeBroker(evs ...*structs.Evaluation) *fakeBroker {
	return &fakeBroker{evals: evs, requeued: map[string]time.Duration{}, done: make(chan struct{})}
}

func (b *fakeBroker) DequeueFunc(ctx context.Context, admit func(string) bool) (*structs.Evaluation, string, error) {
	b.mu.Lock()
	if len(b.evals) > 0 && admit(b.evals[0].Type) {
		ev := b.evals[0]
		b.evals = b.evals[1:]
		b.mu.Unlock()
		return ev, "token-" + ev.ID, nil
	}
	b.mu.Unlock()
	<-ctx.Done()
	return nil, "", ctx.Err()
}

func (b *fakeBroker) record(list *[]string, id string) error {
	b.mu.Lock()
	*list = append(*list, id)
	b.mu.Unlock()
	b.once.Do(func() { close(b.done) })
	return nil
}

func (b *fakeBroker) Ack(id, _ string) error  { return b.record(&b.acked, id) }
func (b *fakeBroker) Nack(id, _ string) error { return b.record(&b.nacked, id) }
func (b *fakeBroker) Requeue(id, _ string, d time.Duration) error {
	b.mu.Lock()
	b.requeued[id] = d
	b.mu.Unlock()
	b.once.Do(func() { close(b.done) })
	return nil
}
func (b *fakeBroker) PauseNackTimeout(string, string) error  { return nil }
func (b *fakeBroker) ResumeNackTimeout(string, string) error { return nil }

type errRouter struct{ err error }

func (r errRouter) Lookup(string) (scheduler.Scheduler, int, error) { return nil, 0, r.err }
func (errRouter) ServedTypes() []string                             { return []string{"service"} }

// runOne runs a one-worker pool until the broker saw the eval's outcome.
func runOne(t *testing.T, b *fakeBroker, cfg Config) *Pool {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workers, cfg.Broker = 1, b
	cfg.Snapshot = func(context.Context, uint64) (*state.StateSnapshot, error) { return st.Snapshot() }
	cfg.State = func() *state.StateStore { return st }
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	p := New(cfg)
	go func() {
		defer close(ran)
		p.Run(ctx)
	}()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		t.Error("the worker did not finish the eval")
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	return p
}

// An eval of a type no plugin serves right now is held, not failed: it
// is handed back without spending a delivery, nothing is recorded, and the
// reason is kept. (It used to be failed; a reload may bring the plugin
// back.)
func TestUnservedTypeHoldsEval(t *testing.T) {
	ev := &structs.Evaluation{ID: "e1", Namespace: "default", JobID: "j", Type: "nope", Status: structs.EvalStatusPending}
	b := newFakeBroker(ev)
	held := &heldMetrics{}
	cfg := Config{
		Schedulers: errRouter{err: errors.New("no plugin serves nope")},
		Metrics:    held,
		Apply: func(structs.MessageType, any) (uint64, error) {
			t.Error("an eval of an unserved type must not be recorded")
			return 1, nil
		},
	}
	p := runOne(t, b, cfg)
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.requeued["e1"]
	if !ok || len(b.acked)+len(b.nacked) != 0 {
		t.Fatalf("requeued %v acked %v nacked %v, want the eval requeued only", b.requeued, b.acked, b.nacked)
	}
	if d != evalbroker.DefaultInitialNackDelay {
		t.Errorf("first hold delay %v, want the broker's first nack delay %v", d, evalbroker.DefaultInitialNackDelay)
	}
	want := `no scheduler plugin serves job type "nope" (served: service); the eval waits for a plugin that declares it`
	if got := p.TakeNackReason("e1"); got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	if held.n.Load() != 1 {
		t.Errorf("EvalHeld counted %d, want 1", held.n.Load())
	}
}

type heldMetrics struct {
	noMetrics
	n atomic.Int32
}

func (h *heldMetrics) EvalHeld(string) { h.n.Add(1) }

// A held eval's delay doubles from the first nack delay up to the bound,
// and never spins.
func TestHoldDelay(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nackDelay time.Duration
		max       time.Duration
		want      []time.Duration
	}{
		{"defaults", 0, 0, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
		{"short", time.Millisecond, 50 * time.Millisecond, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 50 * time.Millisecond}},
		{"bound below the first delay", 3 * time.Second, time.Second, []time.Duration{time.Second, time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(Config{InitialNackDelay: tc.nackDelay, MaxHoldDelay: tc.max}).newWorker(0)
			for i, want := range tc.want {
				if got := w.holdDelay(i + 1); got != want {
					t.Errorf("hold %d: delay %v, want %v", i+1, got, want)
				}
			}
			if got := w.holdDelay(1000); got <= 0 || got > w.p.cfg.MaxHoldDelay {
				t.Errorf("hold 1000: delay %v, want within (0, %v]", got, w.p.cfg.MaxHoldDelay)
			}
		})
	}
}

// A call that fails because a reload took the type's plugin away between
// Lookup and the call spends no delivery: the eval is held when no plugin
// serves the type now, and retried when another plugin took it over.
func TestCallOnRemovedPlugin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		after    error  // Lookup's error after the failed call
		afterBy  string // else the plugin serving the type then
		wantHeld bool
	}{
		{name: "type no longer served", after: errors.New("not served"), wantHeld: true},
		{name: "another plugin took the type over", afterBy: "other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &structs.Evaluation{ID: "e1", Namespace: "default", JobID: "j", Type: "gone"}
			b := newFakeBroker(ev)
			r := &movingRouter{first: namedSched{name: "removed", err: structs.NewError(structs.ErrUnavailable, "plugin removed")},
				after: tc.after, afterBy: namedSched{name: tc.afterBy}}
			p := runOne(t, b, Config{Schedulers: r, Apply: func(structs.MessageType, any) (uint64, error) {
				t.Error("nothing may be recorded")
				return 1, nil
			}})
			b.mu.Lock()
			defer b.mu.Unlock()
			if _, ok := b.requeued["e1"]; !ok || len(b.nacked)+len(b.acked) != 0 {
				t.Fatalf("requeued %v nacked %v acked %v, want the eval requeued only", b.requeued, b.nacked, b.acked)
			}
			if held := p.held.take("e1") > 0; held != tc.wantHeld {
				t.Errorf("held = %v, want %v", held, tc.wantHeld)
			}
			if p.gate.admits("gone") != true {
				t.Error("the type was degraded for a plugin that left")
			}
		})
	}
}

// movingRouter serves its first Lookup with first and every later one
// with after (an error) or afterBy.
type movingRouter struct {
	mu      sync.Mutex
	n       int
	first   namedSched
	after   error
	afterBy namedSched
}

func (r *movingRouter) Lookup(string) (scheduler.Scheduler, int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	switch {
	case r.n == 1:
		return r.first, 1, nil
	case r.after != nil:
		return nil, 0, r.after
	}
	return r.afterBy, 1, nil
}

func (*movingRouter) ServedTypes() []string { return nil }

// namedSched is a scheduler handle of a named plugin whose calls fail
// with err.
type namedSched struct {
	name string
	err  error
}

func (n namedSched) PluginName() string { return n.name }
func (n namedSched) Info(context.Context) (*pb.InfoResponse, error) {
	return nil, n.err
}
func (n namedSched) Schedule(context.Context, *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
	return nil, n.err
}

func TestUnavailablePluginRequeuesWithoutDelivery(t *testing.T) {
	cases := []struct {
		name      string
		nackDelay time.Duration
		want      time.Duration
	}{
		{"broker default", 0, evalbroker.DefaultInitialNackDelay},
		{"never a busy loop", time.Millisecond, 10 * time.Millisecond},
		{"the broker's first nack delay", 3 * time.Second, 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := &structs.Evaluation{ID: "e1", Namespace: "default", JobID: "j", Type: "service"}
			b := newFakeBroker(ev)
			runOne(t, b, Config{
				Schedulers:       errRouter{err: structs.NewError(structs.ErrUnavailable, "restarting")},
				InitialNackDelay: tc.nackDelay,
				Apply: func(structs.MessageType, any) (uint64, error) {
					t.Error("an eval whose plugin is down must not be recorded")
					return 0, nil
				},
			})
			b.mu.Lock()
			defer b.mu.Unlock()
			d, ok := b.requeued["e1"]
			if !ok || len(b.nacked) != 0 || len(b.acked) != 0 {
				t.Fatalf("requeued %v nacked %v acked %v, want the eval requeued only", b.requeued, b.nacked, b.acked)
			}
			if d != tc.want {
				t.Fatalf("requeue delay %v, want %v", d, tc.want)
			}
		})
	}
}

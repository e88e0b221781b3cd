package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
func runOne(t *testing.T, b *fakeBroker, cfg Config) {
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
	go func() {
		defer close(ran)
		New(cfg).Run(ctx)
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
}

func TestUnservedTypeFailsEval(t *testing.T) {
	ev := &structs.Evaluation{ID: "e1", Namespace: "default", JobID: "j", Type: "nope", Status: structs.EvalStatusPending}
	b := newFakeBroker(ev)
	var mu sync.Mutex
	var applied []*structs.Evaluation
	runOne(t, b, Config{
		Schedulers: errRouter{err: errors.New("no plugin serves nope")},
		Apply: func(mt structs.MessageType, msg any) (uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			if mt != structs.EvalUpdateRequestType {
				t.Errorf("applied message type %v, want an eval update", mt)
			}
			applied = append(applied, msg.(*structs.EvalUpdateRequest).Evals...)
			return 1, nil
		},
	})
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != 1 || applied[0].Status != structs.EvalStatusFailed {
		t.Fatalf("applied %+v, want the eval failed", applied)
	}
	if want := `no scheduler plugin serves job type "nope" (served: service)`; applied[0].StatusDescription != want {
		t.Fatalf("description %q, want %q", applied[0].StatusDescription, want)
	}
	if len(b.acked) != 1 || len(b.nacked) != 0 {
		t.Fatalf("acked %v nacked %v, want the eval acked", b.acked, b.nacked)
	}
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

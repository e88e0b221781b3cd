package gcengine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/gc"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// router hands out one collector for every collection.
type router struct{ col sdkgc.Collector }

func (r router) Collector(gcpb.Collection) (sdkgc.Collector, error) {
	if r.col == nil {
		return nil, structs.NewError(structs.ErrUnavailable, "no plugin")
	}
	return r.col, nil
}

// harness is a real state store, the default plugin in process and an
// Apply that writes the GC's entries to the store as the FSM does.
type harness struct {
	t     *testing.T
	store *state.StateStore
	mu    sync.Mutex
	index uint64
	// entries counts the GCReap entries applied; deferred and restored
	// count DeferSnapshots and its restores.
	entries, deferred, restored int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, store: st, index: 100}
}

func (h *harness) next() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.index++
	return h.index
}

func (h *harness) apply(typ structs.MessageType, msg any) (uint64, any, error) {
	idx := h.next()
	switch typ {
	case structs.GCReapRequestType:
		out, err := h.store.GCReap(idx, msg.(*structs.GCReapRequest))
		h.mu.Lock()
		h.entries++
		h.mu.Unlock()
		return idx, out, err
	}
	return 0, nil, fmt.Errorf("unexpected entry %v", typ)
}

func (h *harness) config(col sdkgc.Collector) Config {
	return Config{
		State:  func() *state.StateStore { return h.store },
		Router: router{col: col},
		Apply:  h.apply,
		DeferSnapshots: func() func() {
			h.mu.Lock()
			h.deferred++
			h.mu.Unlock()
			return func() {
				h.mu.Lock()
				h.restored++
				h.mu.Unlock()
			}
		},
		// Everything written before now is past any threshold.
		Now:    func() time.Time { return time.Now().Add(48 * time.Hour) },
		Pacing: &Pacing{BatchObjects: 2, MinPause: time.Microsecond, MaxPause: time.Millisecond},
		// Periodic runs far apart: the tests run the jobs.
		Settings: Settings{JobGCInterval: time.Hour, CSIVolumeClaimGCInterval: time.Hour},
	}
}

// terminalEvals writes n complete evals of a job that does not exist.
func (h *harness) terminalEvals(n int) []string {
	h.t.Helper()
	var evals []*structs.Evaluation
	var ids []string
	for i := range n {
		id := fmt.Sprintf("eval-%02d", i)
		ids = append(ids, id)
		evals = append(evals, &structs.Evaluation{ID: id, Namespace: ns, JobID: "gone", Type: "batch", Priority: 50,
			TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusComplete, ModifyTime: 1})
	}
	if err := h.store.UpsertEvals(h.next(), evals); err != nil {
		h.t.Fatal(err)
	}
	return ids
}

func (h *harness) evalsLeft() int {
	h.t.Helper()
	all, err := h.store.Evals(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(all)
}

// runEngine runs e until the test ends and waits for Run to return.
func runEngine(t *testing.T, e *Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// TestEngineRunNow: a forced run asked of Run reaps the terminal evals in
// entries of BatchObjects, within a deferral of snapshots; once Run ended
// (leadership lost) a request is ErrNoLeader.
func TestEngineRunNow(t *testing.T) {
	h := newHarness(t)
	h.terminalEvals(5)
	e := New(h.config(gc.New()))
	stop := runEngine(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.RunNow(ctx, []string{"eval-gc"}, true); err != nil {
		t.Fatalf("RunNow: %v", err)
	}
	if n := h.evalsLeft(); n != 0 {
		t.Fatalf("%d evals left after a forced eval-gc", n)
	}
	h.mu.Lock()
	entries, deferred, restored := h.entries, h.deferred, h.restored
	h.mu.Unlock()
	if entries != 3 {
		t.Errorf("%d reap entries for 5 evals in entries of 2, want 3", entries)
	}
	if deferred != 1 || restored != 1 {
		t.Errorf("snapshots deferred %d times, restored %d; want once each for one job", deferred, restored)
	}
	stop()
	if err := e.RunNow(ctx, nil, true); !errors.Is(err, structs.ErrNoLeader) {
		t.Fatalf("RunNow after Run ended: %v, want ErrNoLeader", err)
	}
}

// TestEngineNotForcedKeepsRecent: an unforced run judges ages by the
// settings' thresholds: evals younger than eval_gc_threshold stay.
func TestEngineNotForcedKeepsRecent(t *testing.T) {
	h := newHarness(t)
	h.terminalEvals(3)
	cfg := h.config(gc.New())
	ev, err := h.store.EvalByID(nil, "eval-00")
	if err != nil || ev == nil {
		t.Fatalf("eval: %v %v", ev, err)
	}
	changed := time.Unix(0, ev.ModifyTime)
	cfg.Now = func() time.Time { return changed.Add(time.Minute) }
	e := New(cfg)
	st, err := e.Collect(context.Background(), "eval-gc", false)
	if err != nil || st.Reaped != 0 || h.evalsLeft() != 3 {
		t.Fatalf("unforced run of recent evals: %+v %v, %d left; want nothing reaped", st, err, h.evalsLeft())
	}
	st, err = e.Collect(context.Background(), "eval-gc", true)
	if err != nil || st.Reaped != 3 || st.Entries != 2 || h.evalsLeft() != 0 {
		t.Fatalf("forced run: %+v %v, %d left; want 3 reaped in 2 entries", st, err, h.evalsLeft())
	}
}

// TestEngineUnavailable: without a plugin a run keeps everything and says
// so with ErrUnavailable; an unknown job is an error.
func TestEngineUnavailable(t *testing.T) {
	h := newHarness(t)
	h.terminalEvals(2)
	e := New(h.config(nil))
	if _, err := e.Collect(context.Background(), "eval-gc", true); !errors.Is(err, structs.ErrUnavailable) {
		t.Fatalf("run without a plugin: %v, want ErrUnavailable", err)
	}
	if n := h.evalsLeft(); n != 2 {
		t.Fatalf("%d evals left, want 2", n)
	}
	if _, err := e.Collect(context.Background(), "no-such-gc", true); err == nil {
		t.Fatal("an unknown job ran")
	}
}

// TestEngineACLTokenJobNeedsACLs: expired-acl-token-gc runs only with
// ACLs enabled.
func TestEngineACLTokenJobNeedsACLs(t *testing.T) {
	h := newHarness(t)
	var asked []gcpb.Collection
	var mu sync.Mutex
	col := hook{before: func(c gcpb.Collection) { mu.Lock(); asked = append(asked, c); mu.Unlock() }}
	for _, acl := range []bool{false, true} {
		asked = nil
		cfg := h.config(col)
		cfg.ACLEnabled = acl
		cfg.Router = hookRouter{col}
		e := New(cfg)
		stop := runEngine(t, e)
		if err := e.RunNow(context.Background(), nil, true); err != nil {
			t.Fatal(err)
		}
		stop()
		mu.Lock()
		var names []string
		for _, c := range asked {
			names = append(names, c.String())
		}
		mu.Unlock()
		sort.Strings(names)
		has := false
		for _, n := range names {
			has = has || n == gcpb.Collection_COLLECTION_ACL_TOKEN.String()
		}
		if has != acl || len(names) != 7+map[bool]int{true: 1}[acl] {
			t.Errorf("ACLs %t: collections asked %v", acl, names)
		}
	}
}

// hook is a router's view of which collections a run asks for: it keeps
// everything.
type hook struct{ before func(gcpb.Collection) }

func (h hook) Info(ctx context.Context) (*gcpb.InfoResponse, error) { return gc.New().Info(ctx) }

func (h hook) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	return gc.New().Decide(ctx, req)
}

type hookRouter struct{ h hook }

func (r hookRouter) Collector(c gcpb.Collection) (sdkgc.Collector, error) {
	r.h.before(c)
	return r.h, nil
}

// lazyLog is a Propose whose entries apply in log order when an answer is
// waited for (each wait applies every entry before its own, then its
// own): how many are proposed and not applied when the next is proposed
// is what the engine has in flight.
type lazyLog struct {
	h        *harness
	queue    []*lazyEntry
	maxQueue int
	order    []int // entry numbers in the order they applied
	n        int
}

type lazyEntry struct {
	num     int
	req     *structs.GCReapRequest
	applied bool
	idx     uint64
	out     any
	err     error
}

func (l *lazyLog) propose(typ structs.MessageType, msg any) (func() (uint64, any, error), error) {
	if typ != structs.GCReapRequestType {
		return nil, fmt.Errorf("unexpected entry %v", typ)
	}
	l.n++
	e := &lazyEntry{num: l.n, req: msg.(*structs.GCReapRequest)}
	l.queue = append(l.queue, e)
	l.maxQueue = max(l.maxQueue, len(l.queue))
	return func() (uint64, any, error) {
		for !e.applied {
			first := l.queue[0]
			l.queue = l.queue[1:]
			first.idx, first.out, first.err = l.h.apply(structs.GCReapRequestType, first.req)
			first.applied = true
			l.order = append(l.order, first.num)
		}
		return e.idx, e.out, e.err
	}, nil
}

// TestEnginePipelinesIdleEntries: with the cluster idle, reap entries go
// through Propose with up to IdleInFlight of them proposed and not yet
// applied, in order, and every object is reaped and counted; with the
// cluster busy, one at a time.
func TestEnginePipelinesIdleEntries(t *testing.T) {
	for _, tc := range []struct {
		name         string
		idle         bool
		wantInFlight int
	}{
		{name: "idle: two in flight", idle: true, wantInFlight: 2},
		{name: "busy: one at a time", idle: false, wantInFlight: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.terminalEvals(9)
			l := &lazyLog{h: h}
			cfg := h.config(gc.New())
			cfg.Propose = l.propose
			cfg.Quiet = func() (bool, time.Time) {
				if tc.idle {
					return true, time.Now().Add(-time.Hour)
				}
				return false, time.Now()
			}
			cfg.Pacing = &Pacing{BatchObjects: 2, MinPause: time.Microsecond, MaxPause: time.Millisecond,
				Quiet: time.Microsecond, MaxYield: time.Microsecond, IdleAfter: time.Second, IdleInFlight: 2}
			st, err := New(cfg).Collect(context.Background(), "eval-gc", true)
			if err != nil {
				t.Fatal(err)
			}
			if st.Reaped != 9 || st.Entries != 5 || h.evalsLeft() != 0 {
				t.Fatalf("%+v, %d evals left; want 9 reaped in 5 entries", st, h.evalsLeft())
			}
			if l.maxQueue != tc.wantInFlight {
				t.Errorf("at most %d entries in flight, want %d", l.maxQueue, tc.wantInFlight)
			}
			if len(l.queue) != 0 {
				t.Errorf("%d entries never answered", len(l.queue))
			}
			for i, n := range l.order {
				if n != i+1 {
					t.Fatalf("entries applied in order %v", l.order)
				}
			}
		})
	}
}

// deciding counts the pages the default plugin decides and tells onDecide
// the page's number (from 1) before deciding it.
type deciding struct {
	mu       sync.Mutex
	n        int
	onDecide func(n int)
}

func (d *deciding) Info(ctx context.Context) (*gcpb.InfoResponse, error) { return gc.New().Info(ctx) }

func (d *deciding) Decide(ctx context.Context, req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	d.mu.Lock()
	d.n++
	n := d.n
	d.mu.Unlock()
	d.onDecide(n)
	return gc.New().Decide(ctx, req)
}

// TestEngineDecidesAheadWhenIdle: with the cluster idle, the next page is
// decided while the last one's entries are still being proposed; with it
// busy, every page is applied before the next is decided.
func TestEngineDecidesAheadWhenIdle(t *testing.T) {
	pacing := func() *Pacing {
		return &Pacing{BatchObjects: 2, MinPause: time.Microsecond, MaxPause: time.Millisecond,
			Quiet: time.Microsecond, MaxYield: time.Microsecond, IdleAfter: time.Second, IdleInFlight: 2,
			Limits: Limits{Candidates: 2, Objects: 100, Fill: 2}}
	}
	t.Run("idle: page 2 decided before page 1 is applied", func(t *testing.T) {
		h := newHarness(t)
		h.terminalEvals(9)
		second := make(chan struct{})
		col := &deciding{onDecide: func(n int) {
			if n == 2 {
				close(second)
			}
		}}
		cfg := h.config(col)
		cfg.Pacing = pacing()
		cfg.Quiet = func() (bool, time.Time) { return true, time.Now().Add(-time.Hour) }
		ahead := false
		cfg.Propose = func(typ structs.MessageType, msg any) (func() (uint64, any, error), error) {
			if h.entriesSoFar() == 0 {
				// Page 1's entry: held until page 2 is decided.
				select {
				case <-second:
					ahead = true
				case <-time.After(30 * time.Second):
				}
			}
			idx, out, err := h.apply(typ, msg)
			return func() (uint64, any, error) { return idx, out, err }, nil
		}
		st, err := New(cfg).Collect(context.Background(), "eval-gc", true)
		if err != nil || st.Reaped != 9 || h.evalsLeft() != 0 {
			t.Fatalf("%+v %v, %d left; want 9 reaped", st, err, h.evalsLeft())
		}
		if !ahead {
			t.Fatal("page 2 was not decided while page 1's entry was held")
		}
	})
	t.Run("busy: each page applied before the next is decided", func(t *testing.T) {
		h := newHarness(t)
		h.terminalEvals(9)
		var left []int
		col := &deciding{onDecide: func(int) { left = append(left, h.evalsLeft()) }}
		cfg := h.config(col)
		cfg.Pacing = pacing()
		cfg.Quiet = func() (bool, time.Time) { return false, time.Now() }
		cfg.Propose = func(typ structs.MessageType, msg any) (func() (uint64, any, error), error) {
			idx, out, err := h.apply(typ, msg)
			return func() (uint64, any, error) { return idx, out, err }, nil
		}
		st, err := New(cfg).Collect(context.Background(), "eval-gc", true)
		if err != nil || st.Reaped != 9 || h.evalsLeft() != 0 {
			t.Fatalf("%+v %v, %d left; want 9 reaped", st, err, h.evalsLeft())
		}
		if want := []int{9, 7, 5, 3, 1}; fmt.Sprint(left) != fmt.Sprint(want) {
			t.Fatalf("evals left as each page was decided: %v, want %v", left, want)
		}
	})
}

func (h *harness) entriesSoFar() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.entries
}

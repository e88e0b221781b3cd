package drainer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// entry is one Raft entry the drainer proposed.
type entry struct {
	typ structs.MessageType
	msg any
}

// harness is a real state store with a draining node, a fake Raft that
// records entries (and fails them while fail is set), and a fake clock.
type harness struct {
	t       *testing.T
	store   *state.StateStore
	index   uint64
	mu      sync.Mutex
	entries []entry
	fail    error
	now     time.Time
	d       *Drainer
}

func newHarness(t *testing.T, node *structs.Node) *harness {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: st, index: 100, now: t0}
	node.Name, node.Datacenter, node.NodePool, node.Status = node.ID, "dc1", structs.NodePoolDefault, structs.NodeStatusReady
	h.must(st.UpsertNode(h.next(), node))
	h.d = New(Config{
		State: func() *state.StateStore { return h.store },
		Apply: func(typ structs.MessageType, msg any) (uint64, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.fail != nil {
				return 0, h.fail
			}
			h.entries = append(h.entries, entry{typ, msg})
			return h.next(), nil
		},
		NewEval: func(j *structs.Job, trigger string) *structs.Evaluation {
			return &structs.Evaluation{ID: "eval-" + j.ID, Namespace: j.Namespace, JobID: j.ID, TriggeredBy: trigger}
		},
		Now:      func() time.Time { h.mu.Lock(); defer h.mu.Unlock(); return h.now },
		Interval: 5 * time.Millisecond,
	})
	return h
}

func (h *harness) next() uint64 { h.index++; return h.index }

func (h *harness) must(err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) job(j *structs.Job) *structs.Job {
	h.t.Helper()
	j.Namespace, j.Type = structs.DefaultNamespace, "batch"
	h.must(h.store.UpsertJob(h.next(), j))
	got, err := h.store.JobByID(nil, j.Namespace, j.ID)
	h.must(err)
	return got
}

func (h *harness) allocs(allocs ...*structs.Allocation) {
	h.t.Helper()
	for _, a := range allocs {
		a.NodeID, a.TaskGroup = "n", "g"
	}
	h.must(h.store.UpsertAllocs(h.next(), allocs))
}

func (h *harness) taken() []entry {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.entries
	h.entries = nil
	return out
}

// TestTickMigrates: allocs to migrate are marked in one entry, with one
// drain eval per job that still exists.
func TestTickMigrates(t *testing.T) {
	h := newHarness(t, draining(false))
	svc := h.job(&structs.Job{ID: "svc", TypeBehavior: &structs.JobTypeBehavior{}})
	gone := &structs.Job{ID: "gone", Namespace: structs.DefaultNamespace, TypeBehavior: &structs.JobTypeBehavior{}}
	h.allocs(running("a1", svc), running("a2", svc), running("a3", gone))

	h.d.Tick()
	got := h.taken()
	if len(got) != 1 || got[0].typ != structs.AllocUpdateDesiredTransitionRequestType {
		t.Fatalf("entries %+v, want one desired-transition update", got)
	}
	req := got[0].msg.(*structs.AllocUpdateDesiredTransitionRequest)
	if len(req.Allocs) != 3 || !req.Allocs["a1"].ShouldMigrate() || !req.Allocs["a3"].ShouldMigrate() {
		t.Errorf("allocs marked %v, want a1..a3 to migrate", req.Allocs)
	}
	if len(req.Evals) != 1 || req.Evals[0].JobID != "svc" || req.Evals[0].NodeID != "n" ||
		req.Evals[0].TriggeredBy != structs.EvalTriggerNodeDrain || req.Evals[0].JobModifyIndex != svc.JobModifyIndex {
		t.Errorf("evals %+v, want one node-drain eval of svc on n at its job modify index", req.Evals)
	}
}

// TestTickCompletes: a draining node with nothing left has its drain
// completed.
func TestTickCompletes(t *testing.T) {
	h := newHarness(t, draining(false))
	h.d.Tick()
	got := h.taken()
	if len(got) != 1 || got[0].typ != structs.NodeUpdateDrainRequestType {
		t.Fatalf("entries %+v, want one drain update", got)
	}
	req := got[0].msg.(*structs.NodeUpdateDrainRequest)
	if req.NodeID != "n" || req.DrainStrategy != nil || req.NodeEvent == nil || req.NodeEvent.Message != "Node drain complete" {
		t.Fatalf("drain update %+v, want n's drain cleared with a completion event", req)
	}
}

// TestTickForcedOncePerDeadline: the first pass past the deadline marks
// the allocs already migrating again (their jobs are evaluated once more);
// later passes do not, unless the entry failed.
func TestTickForcedOncePerDeadline(t *testing.T) {
	h := newHarness(t, draining(false))
	svc := h.job(&structs.Job{ID: "svc", TypeBehavior: &structs.JobTypeBehavior{}})
	h.allocs(alloc("m", svc, structs.AllocClientStatusRunning, true))

	h.d.Tick()
	if got := h.taken(); len(got) != 0 {
		t.Fatalf("before the deadline: entries %+v, want none (already migrating)", got)
	}
	h.mu.Lock()
	h.now = deadline.Add(time.Second)
	h.fail = errors.New("raft down")
	h.mu.Unlock()
	h.d.Tick() // fails: tried again on the next pass
	h.mu.Lock()
	h.fail = nil
	h.mu.Unlock()
	h.d.Tick()
	if got := h.taken(); len(got) != 1 || got[0].typ != structs.AllocUpdateDesiredTransitionRequestType {
		t.Fatalf("first pass past the deadline: entries %+v, want the migrating alloc marked again", got)
	}
	h.d.Tick()
	if got := h.taken(); len(got) != 0 {
		t.Fatalf("second pass past the deadline: entries %+v, want none", got)
	}
}

// TestRunStops: Run makes passes until its context ends, and then returns.
func TestRunStops(t *testing.T) {
	h := newHarness(t, draining(false))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.d.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		n := len(h.entries)
		h.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run made no pass in 10s")
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-done:
			t.Fatal("Run returned before its context ended")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

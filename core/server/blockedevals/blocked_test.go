package blockedevals

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/server/evalbroker"
	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an Enqueuer that remembers what it was given.
type recorder struct {
	mu  sync.Mutex
	evs []*structs.Evaluation
}

func (r *recorder) Enqueue(ev *structs.Evaluation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

// take returns the IDs enqueued since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for _, ev := range r.evs {
		ids = append(ids, ev.ID)
	}
	r.evs = nil
	return ids
}

func newTracker(t *testing.T) (*BlockedEvals, *recorder) {
	t.Helper()
	r := &recorder{}
	b := New(r, nil)
	b.SetEnabled(true)
	return b, r
}

type evalOpt func(*structs.Evaluation)

func pinned(node string) evalOpt { return func(e *structs.Evaluation) { e.NodeID = node } }
func escaped() evalOpt           { return func(e *structs.Evaluation) { e.EscapedComputedClass = true } }
func snapshot(i uint64) evalOpt  { return func(e *structs.Evaluation) { e.SnapshotIndex = i } }
func ns(n string) evalOpt        { return func(e *structs.Evaluation) { e.Namespace = n } }
func classes(kv ...any) evalOpt {
	return func(e *structs.Evaluation) {
		e.ClassEligibility = map[string]bool{}
		for i := 0; i < len(kv); i += 2 {
			e.ClassEligibility[kv[i].(string)] = kv[i+1].(bool)
		}
	}
}

func blockedEval(id, job string, createIndex uint64, opts ...evalOpt) *structs.Evaluation {
	ev := &structs.Evaluation{
		ID: id, Namespace: "default", JobID: job, Type: "service", Priority: 50,
		Status: structs.EvalStatusBlocked, TriggeredBy: structs.EvalTriggerQueuedAllocs,
		CreateIndex: createIndex, SnapshotIndex: createIndex,
	}
	for _, o := range opts {
		o(ev)
	}
	return ev
}

func ids(evs []*structs.Evaluation) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, ev.ID)
	}
	return out
}

func TestBlockKeepsNewestPerJob(t *testing.T) {
	cases := []struct {
		name      string
		evals     []*structs.Evaluation
		wantKept  int
		wantDupes []string
	}{
		{
			name:      "newer replaces older",
			evals:     []*structs.Evaluation{blockedEval("old", "j", 1), blockedEval("new", "j", 2)},
			wantKept:  1,
			wantDupes: []string{"old"},
		},
		{
			name:      "older arriving late is the duplicate",
			evals:     []*structs.Evaluation{blockedEval("new", "j", 2), blockedEval("old", "j", 1)},
			wantKept:  1,
			wantDupes: []string{"old"},
		},
		{
			name: "pinned evals are per node",
			evals: []*structs.Evaluation{
				blockedEval("n1", "j", 1, pinned("node1")), blockedEval("n2", "j", 2, pinned("node2")),
				blockedEval("n1b", "j", 3, pinned("node1")),
			},
			wantKept:  2,
			wantDupes: []string{"n1"},
		},
		{
			name:     "namespaces are separate",
			evals:    []*structs.Evaluation{blockedEval("a", "j", 1), blockedEval("b", "j", 2, ns("other"))},
			wantKept: 2,
		},
		{
			name:     "the same eval again is no duplicate",
			evals:    []*structs.Evaluation{blockedEval("a", "j", 1), blockedEval("a", "j", 1)},
			wantKept: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, r := newTracker(t)
			for _, ev := range tc.evals {
				b.Block(ev)
			}
			s := b.Stats()
			if s.TotalBlocked != tc.wantKept || s.TotalDuplicates != len(tc.wantDupes) {
				t.Fatalf("stats %+v", s)
			}
			if got := ids(b.Duplicates(0)); !slices.Equal(got, tc.wantDupes) {
				t.Fatalf("duplicates = %v, want %v", got, tc.wantDupes)
			}
			if got := r.take(); got != nil {
				t.Fatalf("Block enqueued %v", got)
			}
		})
	}
}

func TestUnblockClass(t *testing.T) {
	evals := []*structs.Evaluation{
		blockedEval("eligible", "j1", 1, classes("c1", true, "c2", false)),
		blockedEval("ineligible", "j2", 2, classes("c1", false)),
		blockedEval("unknown", "j3", 3, classes("c2", true)),
		blockedEval("escaped", "j4", 4, escaped(), classes("c1", false)),
		blockedEval("pinned", "j5", 5, pinned("node1"), classes("c1", true)),
	}
	b, r := newTracker(t)
	for _, ev := range evals {
		b.Block(ev)
	}
	if s := b.Stats(); s.TotalCaptured != 3 || s.TotalEscaped != 1 || s.TotalPinned != 1 || s.ByNode["node1"] != 1 {
		t.Fatalf("stats %+v", s)
	}

	r.mu.Lock()
	r.evs = nil
	r.mu.Unlock()
	b.Unblock("c1", 10)
	r.mu.Lock()
	got := slices.Clone(r.evs)
	r.evs = nil
	r.mu.Unlock()
	if want := []string{"eligible", "unknown", "escaped"}; !slices.Equal(ids(got), want) {
		t.Fatalf("released %v, want %v", ids(got), want)
	}
	for i, ev := range got {
		orig := evals[[]int{0, 2, 3}[i]]
		if ev == orig || ev.ID != orig.ID || ev.Status != structs.EvalStatusPending ||
			ev.TriggeredBy != structs.EvalTriggerQueuedAllocs {
			t.Errorf("released %+v: want a pending copy of %s", ev, orig.ID)
		}
		if orig.Status != structs.EvalStatusBlocked {
			t.Errorf("original %s was mutated to %s", orig.ID, orig.Status)
		}
	}
	if s := b.Stats(); s.TotalBlocked != 2 || s.TotalEscaped != 0 {
		t.Fatalf("after unblock: %+v", s)
	}
	b.Unblock("c1", 11) // nothing left for c1
	if got := r.take(); got != nil {
		t.Fatalf("second unblock released %v", got)
	}
}

func TestUnblockNode(t *testing.T) {
	b, r := newTracker(t)
	b.Block(blockedEval("a", "sys1", 1, pinned("node1")))
	b.Block(blockedEval("b", "sys2", 2, pinned("node1")))
	b.Block(blockedEval("c", "sys1", 3, pinned("node2")))
	b.Block(blockedEval("d", "svc", 4))

	b.UnblockNode("node3", 10)
	b.UnblockNode("", 10)
	if got := r.take(); got != nil {
		t.Fatalf("other node released %v", got)
	}
	b.UnblockNode("node1", 11)
	if got := r.take(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("node1 released %v", got)
	}
	if s := b.Stats(); s.TotalBlocked != 2 || s.ByNode["node2"] != 1 || s.ByNode["node1"] != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestUnblockAll(t *testing.T) {
	b, r := newTracker(t)
	b.Block(blockedEval("a", "j1", 1, pinned("node1")))
	b.Block(blockedEval("b", "j2", 2, classes("c", false)))
	b.Block(blockedEval("c", "j3", 3, escaped()))
	b.UnblockAll(10)
	if got := r.take(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("released %v", got)
	}
	if s := b.Stats(); s.TotalBlocked != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestUntrack(t *testing.T) {
	b, r := newTracker(t)
	b.Block(blockedEval("a", "sys", 1, pinned("node1")))
	b.Block(blockedEval("b", "sys", 2, pinned("node2")))
	b.Block(blockedEval("c", "other", 3))
	b.Block(blockedEval("d", "sys", 4, ns("elsewhere")))

	b.Untrack("default", "sys")
	b.Untrack("default", "missing")
	if s := b.Stats(); s.TotalBlocked != 2 || s.TotalPinned != 0 {
		t.Fatalf("stats %+v", s)
	}
	b.UnblockAll(10)
	if got := r.take(); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("released %v, untracked evals must be gone", got)
	}
}

// TestMissedUnblock covers the race where an unblock lands while the eval
// is still being scheduled from an older snapshot.
func TestMissedUnblock(t *testing.T) {
	cases := []struct {
		name    string
		unblock func(b *BlockedEvals)
		eval    *structs.Evaluation
		release bool
	}{
		{"eligible class after snapshot", func(b *BlockedEvals) { b.Unblock("c1", 10) },
			blockedEval("e", "j", 1, snapshot(5), classes("c1", true)), true},
		{"unknown class after snapshot", func(b *BlockedEvals) { b.Unblock("c9", 10) },
			blockedEval("e", "j", 1, snapshot(5), classes("c1", true)), true},
		{"ineligible class after snapshot", func(b *BlockedEvals) { b.Unblock("c1", 10) },
			blockedEval("e", "j", 1, snapshot(5), classes("c1", false)), false},
		{"unblock seen by the snapshot", func(b *BlockedEvals) { b.Unblock("c1", 10) },
			blockedEval("e", "j", 1, snapshot(10), classes("c1", true)), false},
		{"escaped, any class", func(b *BlockedEvals) { b.Unblock("c1", 10) },
			blockedEval("e", "j", 1, snapshot(5), escaped(), classes("c1", false)), true},
		{"pinned, its node", func(b *BlockedEvals) { b.UnblockNode("node1", 10) },
			blockedEval("e", "j", 1, snapshot(5), pinned("node1")), true},
		{"pinned, another node", func(b *BlockedEvals) { b.UnblockNode("node2", 10) },
			blockedEval("e", "j", 1, snapshot(5), pinned("node1")), false},
		{"pinned, class unblock", func(b *BlockedEvals) { b.Unblock("c1", 10) },
			blockedEval("e", "j", 1, snapshot(5), pinned("node1")), false},
		{"unblock all", func(b *BlockedEvals) { b.UnblockAll(10) },
			blockedEval("e", "j", 1, snapshot(5), pinned("node1"), classes("c1", false)), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, r := newTracker(t)
			tc.unblock(b)
			b.Block(tc.eval)
			got := r.take()
			if tc.release {
				if !slices.Equal(got, []string{"e"}) || b.Stats().TotalBlocked != 0 {
					t.Fatalf("want immediate release, got %v, stats %+v", got, b.Stats())
				}
			} else if got != nil || b.Stats().TotalBlocked != 1 {
				t.Fatalf("want tracked, got released %v, stats %+v", got, b.Stats())
			}
		})
	}
}

// Forgetting unblock history must err on the side of releasing.
func TestHistoryPruneIsConservative(t *testing.T) {
	b, r := newTracker(t)
	b.mu.Lock()
	b.classUnblocks = newIndexHistory(4)
	b.mu.Unlock()
	for i := 1; i <= 5; i++ {
		b.Unblock(fmt.Sprintf("c%d", i), uint64(i*10))
	}
	b.mu.Lock()
	kept, floor := len(b.classUnblocks.latest), b.classUnblocks.floor
	b.mu.Unlock()
	if kept > 4 || floor == 0 {
		t.Fatalf("history not pruned: %d keys, floor %d", kept, floor)
	}
	// c1 was forgotten; an eval that found it ineligible but predates the
	// floor is released anyway, one newer than every unblock is kept.
	b.Block(blockedEval("old", "j1", 1, snapshot(floor-1), classes("c1", false, "c2", false, "c3", false, "c4", false, "c5", false)))
	b.Block(blockedEval("new", "j2", 2, snapshot(50), classes("c1", true)))
	if got := r.take(); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("released %v, want [old]", got)
	}
}

func TestDisableFlushes(t *testing.T) {
	b, r := newTracker(t)
	b.Block(blockedEval("a", "j1", 1))
	b.Block(blockedEval("b", "j1", 2))
	b.Unblock("c1", 100) // releases b, records history
	r.take()
	b.Block(blockedEval("c", "j2", 3, snapshot(200)))

	b.SetEnabled(false)
	if b.Enabled() {
		t.Fatal("still enabled")
	}
	if s := b.Stats(); s.TotalBlocked != 0 || s.TotalDuplicates != 0 {
		t.Fatalf("not flushed: %+v", s)
	}
	b.Block(blockedEval("d", "j3", 4))
	b.Unblock("c1", 300)
	b.UnblockNode("n", 300)
	b.UnblockAll(300)
	b.Untrack("default", "j3")
	if got := r.take(); got != nil {
		t.Fatalf("disabled tracker enqueued %v", got)
	}

	b.SetEnabled(true)
	b.SetEnabled(true)
	if s := b.Stats(); s.TotalBlocked != 0 {
		t.Fatalf("eval blocked while disabled survived: %+v", s)
	}
	// The unblock history of the previous term is gone too.
	b.Block(blockedEval("e", "j4", 5, snapshot(1)))
	if got := r.take(); got != nil || b.Stats().TotalBlocked != 1 {
		t.Fatalf("stale history released %v", got)
	}
}

func TestDuplicatesDrainInBatches(t *testing.T) {
	b, _ := newTracker(t)
	for i := uint64(1); i <= 5; i++ {
		b.Block(blockedEval(fmt.Sprintf("e%d", i), "j", i))
	}
	if got := ids(b.Duplicates(3)); !slices.Equal(got, []string{"e1", "e2", "e3"}) {
		t.Fatalf("first batch %v", got)
	}
	if got := ids(b.Duplicates(3)); !slices.Equal(got, []string{"e4"}) {
		t.Fatalf("second batch %v", got)
	}
	if got := b.Duplicates(3); got != nil {
		t.Fatalf("third batch %v", got)
	}
}

// TestReblockWithBroker runs the reblock race against the real broker: a
// blocked eval released while its worker still holds it must be delivered
// again after the worker acks, not lost.
func TestReblockWithBroker(t *testing.T) {
	broker := evalbroker.New(evalbroker.Config{}, nil)
	broker.SetEnabled(true)
	defer broker.SetEnabled(false)
	b := New(broker, nil)
	b.SetEnabled(true)

	ev := blockedEval("e", "j", 1, snapshot(1), classes("c1", true))
	b.Block(ev)
	b.Unblock("c1", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, token, err := broker.Dequeue(ctx, []string{"service"})
	if err != nil || got.ID != "e" || got.Status != structs.EvalStatusPending {
		t.Fatalf("Dequeue = %+v, %v", got, err)
	}

	// The worker still cannot place and reblocks from snapshot 2; capacity
	// frees up again before it acks.
	re := ev.Copy()
	re.SnapshotIndex = 2
	b.Reblock(re, token)
	b.Unblock("c1", 3)
	if s := broker.Stats(); s.TotalReady != 0 || s.TotalUnacked != 1 {
		t.Fatalf("broker stats before ack: %+v", s)
	}
	if err := broker.Ack("e", token); err != nil {
		t.Fatal(err)
	}
	again, _, err := broker.Dequeue(ctx, []string{"service"})
	if err != nil || again.ID != "e" {
		t.Fatalf("redelivery after ack = %+v, %v", again, err)
	}
}

// TestConcurrentBlockUnblock hammers the tracker from several goroutines
// and checks that every eval ends up enqueued or reported as a duplicate.
func TestConcurrentBlockUnblock(t *testing.T) {
	b, r := newTracker(t)
	const writers, perWriter = 4, 50
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				idx := uint64(w*perWriter + i + 1)
				b.Block(blockedEval(fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("job%d", i%7), idx,
					classes(fmt.Sprintf("c%d", i%3), true), snapshot(idx)))
			}
		}(w)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				b.Unblock(fmt.Sprintf("c%d", i%3), uint64(w*perWriter+i+1))
				_ = b.Stats()
			}
		}(w)
	}
	wg.Wait()
	b.UnblockAll(1 << 40)

	seen := map[string]int{}
	for _, id := range r.take() {
		seen[id]++
	}
	for _, id := range ids(b.Duplicates(0)) {
		seen[id]++
	}
	if len(seen) != writers*perWriter {
		t.Fatalf("%d evals accounted for, want %d", len(seen), writers*perWriter)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("eval %s released or duplicated %d times", id, n)
		}
	}
}

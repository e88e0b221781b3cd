package state

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// blockingResult is what a BlockingQuery run in the background returned.
type blockingResult struct {
	index uint64
	err   error
	runs  int
}

// runBlocking starts a blocking query for the allocs of node and returns a
// channel that receives each run of fn (so a test writes only once the
// query is blocked) and one for the result.
func runBlocking(ctx context.Context, s *StateStore, minIndex uint64, node string) (<-chan int, <-chan blockingResult) {
	ran := make(chan int, 16)
	done := make(chan blockingResult, 1)
	go func() {
		runs := 0
		idx, err := s.BlockingQuery(ctx, minIndex, func(ws memdb.WatchSet, st *StateStore) (uint64, error) {
			runs++
			if _, err := st.AllocsByNode(ws, node); err != nil {
				return 0, err
			}
			ran <- runs
			return st.Index(TableAllocs), nil
		})
		done <- blockingResult{idx, err, runs}
	}()
	return ran, done
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestBlockingQueryWakesOnWrite(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("service"))
	must(t, s.UpsertAllocs(11, []*structs.Allocation{mockAlloc(job, "n1")}))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran, done := runBlocking(ctx, s, 11, "n1")
	waitFor(t, ran, "first run")
	// A write elsewhere does not satisfy the query; an alloc write on n1 does.
	must(t, s.UpsertNode(12, mockNode()))
	must(t, s.UpsertAllocs(13, []*structs.Allocation{mockAlloc(job, "n1")}))
	res := waitFor(t, done, "query result")
	if res.err != nil || res.index != 13 {
		t.Errorf("result = index %d err %v, want 13", res.index, res.err)
	}
}

func TestBlockingQueryDeadline(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("service"))
	must(t, s.UpsertAllocs(11, []*structs.Allocation{mockAlloc(job, "n1")}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, done := runBlocking(ctx, s, 11, "n1")
	res := waitFor(t, done, "query result")
	if res.err != nil || res.index != 11 || res.runs != 1 {
		t.Errorf("idle query: index %d err %v runs %d, want 11, nil, 1", res.index, res.err, res.runs)
	}
	if time.Since(start) < 30*time.Millisecond {
		t.Errorf("returned after %v, before the deadline", time.Since(start))
	}
}

func TestBlockingQueryCancelAndNoBlock(t *testing.T) {
	s := testStore(t)
	must(t, s.UpsertNode(10, mockNode()))

	ctx, cancel := context.WithCancel(context.Background())
	ran, done := runBlocking(ctx, s, 10, "n1")
	waitFor(t, ran, "first run")
	cancel()
	if res := waitFor(t, done, "cancelled query"); !errors.Is(res.err, context.Canceled) {
		t.Errorf("cancelled query err = %v, want context.Canceled", res.err)
	}

	// minIndex 0 and an index already past minIndex answer at once.
	for _, min := range []uint64{0, 5} {
		idx, err := s.BlockingQuery(context.Background(), min, func(ws memdb.WatchSet, st *StateStore) (uint64, error) {
			return st.Index(TableNodes), nil
		})
		if err != nil || idx != 10 {
			t.Errorf("minIndex %d: %d %v", min, idx, err)
		}
	}
	// An error from fn ends the query.
	boom := errors.New("boom")
	if _, err := s.BlockingQuery(context.Background(), 100, func(memdb.WatchSet, *StateStore) (uint64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("fn error = %v", err)
	}
}

func TestBlockingQueryFollowsRestoredStore(t *testing.T) {
	old := testStore(t)
	job := storedJob(t, old, 10, mockJob("service"))
	must(t, old.UpsertAllocs(11, []*structs.Allocation{mockAlloc(job, "n1")}))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ran, done := runBlocking(ctx, old, 11, "n1")
	waitFor(t, ran, "first run")

	// Build the replacement: old's state plus one more alloc.
	snapSrc := testStore(t)
	j2 := storedJob(t, snapSrc, 10, job.Copy())
	must(t, snapSrc.UpsertAllocs(20, []*structs.Allocation{mockAlloc(j2, "n1")}))
	fresh := roundTrip(t, snapSrc)
	old.Abandon(fresh)

	select {
	case <-old.AbandonCh():
	default:
		t.Fatal("AbandonCh not closed")
	}
	res := waitFor(t, done, "query result")
	if res.err != nil || res.index != 20 {
		t.Errorf("after restore: index %d err %v, want 20 from the new store", res.index, res.err)
	}
}

func TestSnapshotIsolation(t *testing.T) {
	s := testStore(t)
	job := storedJob(t, s, 10, mockJob("service"))
	snap, err := s.Snapshot()
	must(t, err)
	must(t, s.UpsertAllocs(11, []*structs.Allocation{mockAlloc(job, "n1")}))
	if got, _ := snap.AllocsByNode(nil, "n1"); len(got) != 0 {
		t.Error("snapshot sees a later write")
	}
	// Writes to the snapshot (optimistic plan apply) stay in it.
	must(t, snap.UpsertAllocs(12, []*structs.Allocation{mockAlloc(job, "n2")}))
	if got, _ := s.AllocsByNode(nil, "n2"); len(got) != 0 {
		t.Error("store sees a write made to a snapshot")
	}
	if snap.LatestIndex() != 12 || s.LatestIndex() != 11 {
		t.Errorf("latest indexes: snapshot %d store %d", snap.LatestIndex(), s.LatestIndex())
	}
}

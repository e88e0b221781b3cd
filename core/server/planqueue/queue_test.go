package planqueue

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/structs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newQueue(t *testing.T) *Queue {
	t.Helper()
	q := New()
	q.SetEnabled(true)
	t.Cleanup(func() { q.SetEnabled(false) })
	return q
}

func plan(evalID string, prio int) *structs.Plan {
	return &structs.Plan{EvalID: evalID, Priority: prio}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestDequeueOrder(t *testing.T) {
	cases := []struct {
		name  string
		plans []*structs.Plan
		want  []string
	}{
		{"FIFO at equal priority",
			[]*structs.Plan{plan("a", 50), plan("b", 50), plan("c", 50)},
			[]string{"a", "b", "c"}},
		{"priority first",
			[]*structs.Plan{plan("low", 10), plan("high", 90), plan("mid", 50)},
			[]string{"high", "mid", "low"}},
		{"priority then FIFO",
			[]*structs.Plan{plan("a1", 50), plan("b1", 70), plan("a2", 50), plan("b2", 70)},
			[]string{"b1", "b2", "a1", "a2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			for _, p := range tc.plans {
				if _, err := q.Enqueue(p); err != nil {
					t.Fatal(err)
				}
			}
			if s := q.Stats(); s.Depth != len(tc.plans) {
				t.Fatalf("depth %d", s.Depth)
			}
			var got []string
			for range tc.plans {
				p, err := q.Dequeue(ctxT(t))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p.Plan.EvalID)
				p.Respond(&structs.PlanResult{}, nil)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
			if s := q.Stats(); s.Depth != 0 {
				t.Fatalf("depth after drain %d", s.Depth)
			}
		})
	}
}

func TestRespondDeliversToWaiter(t *testing.T) {
	q := newQueue(t)
	p := plan("e1", 50)
	fut, err := q.Enqueue(p)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *structs.PlanResult
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		res, err := fut.Wait(context.Background())
		got <- outcome{res, err}
	}()

	pend, err := q.Dequeue(ctxT(t))
	if err != nil || pend.Plan != p || pend.EnqueueTime.IsZero() {
		t.Fatalf("Dequeue = %+v, %v", pend, err)
	}
	want := &structs.PlanResult{AllocIndex: 42}
	pend.Respond(want, nil)
	pend.Respond(nil, errors.New("late")) // ignored: the first response wins
	select {
	case o := <-got:
		if o.err != nil || o.res != want {
			t.Fatalf("Wait = %+v, %v", o.res, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken")
	}

	// An error response reaches the waiter too.
	fut2, _ := q.Enqueue(plan("e2", 50))
	pend2, _ := q.Dequeue(ctxT(t))
	boom := errors.New("raft apply failed")
	pend2.Respond(nil, boom)
	if _, err := fut2.Wait(ctxT(t)); !errors.Is(err, boom) {
		t.Fatalf("Wait = %v, want %v", err, boom)
	}
}

func TestWaitContext(t *testing.T) {
	q := newQueue(t)
	fut, _ := q.Enqueue(plan("e1", 50))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := fut.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v", err)
	}
	if s := q.Stats(); s.Depth != 1 {
		t.Fatalf("a timed-out Wait must not withdraw the plan: depth %d", s.Depth)
	}
}

func TestDequeueBlocksUntilEnqueue(t *testing.T) {
	q := newQueue(t)
	got := make(chan *Pending, 1)
	go func() {
		p, _ := q.Dequeue(context.Background())
		got <- p
	}()
	waitFor(t, "blocked Dequeue", func() bool { return q.Stats().DequeueWaiters == 1 })
	p := plan("e1", 50)
	if _, err := q.Enqueue(p); err != nil {
		t.Fatal(err)
	}
	select {
	case pend := <-got:
		if pend == nil || pend.Plan != p {
			t.Fatalf("Dequeue = %+v", pend)
		}
		pend.Respond(nil, nil)
	case <-time.After(10 * time.Second):
		t.Fatal("Dequeue not woken by Enqueue")
	}
}

func TestDequeueTimeout(t *testing.T) {
	q := newQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	start := time.Now()
	if p, err := q.Dequeue(ctx); !errors.Is(err, context.DeadlineExceeded) || p != nil {
		t.Fatalf("Dequeue = %+v, %v", p, err)
	}
	if time.Since(start) < 5*time.Millisecond {
		t.Fatal("Dequeue returned before its deadline")
	}
}

func TestDisableFlushes(t *testing.T) {
	q := newQueue(t)
	futs := make([]Future, 3)
	for i := range futs {
		f, err := q.Enqueue(plan("e", 50))
		if err != nil {
			t.Fatal(err)
		}
		futs[i] = f
	}
	// A plan the applier already holds is the applier's to answer.
	held, err := q.Dequeue(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}

	q.SetEnabled(false)
	if q.Enabled() {
		t.Fatal("still enabled")
	}
	flushed := 0
	for _, f := range futs {
		if f == Future(held) {
			continue
		}
		if _, err := f.Wait(ctxT(t)); !errors.Is(err, ErrFlushed) || err.Error() != "plan queue flushed" {
			t.Fatalf("queued plan: %v, want ErrFlushed", err)
		}
		flushed++
	}
	if flushed != 2 || q.Stats().Depth != 0 {
		t.Fatalf("flushed %d, depth %d", flushed, q.Stats().Depth)
	}
	short, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := held.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held plan was answered by the flush: %v", err)
	}
	held.Respond(&structs.PlanResult{}, nil)
	if _, err := held.Wait(ctxT(t)); err != nil {
		t.Fatalf("held plan: %v", err)
	}

	if _, err := q.Enqueue(plan("late", 50)); !errors.Is(err, ErrNotEnabled) {
		t.Fatalf("Enqueue while disabled: %v", err)
	}
	if _, err := q.Dequeue(ctxT(t)); !errors.Is(err, ErrNotEnabled) {
		t.Fatalf("Dequeue while disabled: %v", err)
	}
	q.SetEnabled(false) // no-op
}

func TestDisableWakesDequeue(t *testing.T) {
	q := newQueue(t)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := q.Dequeue(context.Background())
			errs <- err
		}()
	}
	waitFor(t, "two blocked Dequeue callers", func() bool { return q.Stats().DequeueWaiters == 2 })
	q.SetEnabled(false)
	q.SetEnabled(true) // a flap must not keep old waiters waiting
	for range 2 {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrNotEnabled) {
				t.Fatalf("woken waiter: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiter not woken by disable")
		}
	}
}

func TestEnqueueNil(t *testing.T) {
	q := newQueue(t)
	if _, err := q.Enqueue(nil); !errors.Is(err, ErrNilPlan) {
		t.Fatalf("Enqueue(nil) = %v", err)
	}
}

// TestConcurrent runs submitters against one applier, as the leader does.
func TestConcurrent(t *testing.T) {
	q := newQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	applierDone := make(chan struct{})
	go func() {
		defer close(applierDone)
		for {
			p, err := q.Dequeue(ctx)
			if err != nil {
				return
			}
			p.Respond(&structs.PlanResult{AllocIndex: uint64(p.Plan.Priority)}, nil)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f, err := q.Enqueue(plan("e", i))
			if err != nil {
				errs <- err
				return
			}
			res, err := f.Wait(context.Background())
			if err == nil && res.AllocIndex != uint64(i) {
				err = errors.New("result of another plan")
			}
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	cancel()
	<-applierDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

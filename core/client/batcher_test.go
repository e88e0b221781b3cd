package client

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// batchRecorder is a fake ServerConn sink that records each batch.
type batchRecorder struct {
	mu      sync.Mutex
	batches [][]*structs.Allocation
	fail    int // fail this many sends first
	sent    chan struct{}
}

func (r *batchRecorder) send(_ context.Context, allocs []*structs.Allocation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return errors.New("server unavailable")
	}
	sorted := append([]*structs.Allocation(nil), allocs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	r.batches = append(r.batches, sorted)
	r.sent <- struct{}{}
	return nil
}

func (r *batchRecorder) all() [][]*structs.Allocation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]*structs.Allocation(nil), r.batches...)
}

// fakeTimer stands in for time.After: the test fires the batch window.
type fakeTimer struct {
	armed chan chan time.Time
}

func (f *fakeTimer) after(time.Duration) <-chan time.Time {
	c := make(chan time.Time, 1)
	f.armed <- c
	return c
}

func newTestBatcher(t *testing.T, rec *batchRecorder) (*updateBatcher, *fakeTimer) {
	t.Helper()
	b := newUpdateBatcher(rec.send, time.Hour, hclog.NewNullLogger())
	ft := &fakeTimer{armed: make(chan chan time.Time, 16)}
	b.after = ft.after
	b.backoff = backoff{Base: time.Millisecond, Max: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return b, ft
}

func upd(id, status string) *structs.Allocation {
	return &structs.Allocation{ID: id, ClientStatus: status}
}

func recv[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestUpdateBatcherCoalescesNonTerminal(t *testing.T) {
	rec := &batchRecorder{sent: make(chan struct{}, 16)}
	b, ft := newTestBatcher(t, rec)

	b.Enqueue(upd("a", structs.AllocClientStatusPending))
	window := recv(t, ft.armed, "the batch window to open")
	b.Enqueue(upd("a", structs.AllocClientStatusRunning))
	b.Enqueue(upd("b", structs.AllocClientStatusRunning))
	// The window is open and not fired: nothing may have been sent.
	if got := rec.all(); len(got) != 0 {
		t.Fatalf("sent %d batches before the window closed", len(got))
	}
	window <- time.Now()
	recv(t, rec.sent, "the coalesced batch")
	got := rec.all()
	if len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("batches = %v; want one batch of 2", got)
	}
	if got[0][0].ID != "a" || got[0][0].ClientStatus != structs.AllocClientStatusRunning {
		t.Fatalf("alloc a sent as %q; want its latest status running", got[0][0].ClientStatus)
	}
}

func TestUpdateBatcherTerminalIsImmediate(t *testing.T) {
	for _, status := range []string{structs.AllocClientStatusComplete, structs.AllocClientStatusFailed, structs.AllocClientStatusLost} {
		t.Run(status, func(t *testing.T) {
			rec := &batchRecorder{sent: make(chan struct{}, 16)}
			b, ft := newTestBatcher(t, rec)

			// A non-terminal update opens a window that never fires...
			b.Enqueue(upd("a", structs.AllocClientStatusRunning))
			recv(t, ft.armed, "the batch window to open")
			// ...and a terminal one cuts it short, taking "a" along.
			b.Enqueue(upd("b", status))
			recv(t, rec.sent, "the terminal update")
			got := rec.all()
			if len(got) != 1 || len(got[0]) != 2 || got[0][1].ClientStatus != status {
				t.Fatalf("batches = %v; want [a running, b %s] at once", got, status)
			}

			// Alone, a terminal update does not even open a window.
			b.Enqueue(upd("c", status))
			recv(t, rec.sent, "the second terminal update")
			select {
			case <-ft.armed:
				t.Fatal("a terminal update waited for a batch window")
			default:
			}
		})
	}
}

func TestUpdateBatcherRetriesFailedSends(t *testing.T) {
	rec := &batchRecorder{sent: make(chan struct{}, 16), fail: 2}
	b, _ := newTestBatcher(t, rec)
	b.Enqueue(upd("a", structs.AllocClientStatusFailed))
	recv(t, rec.sent, "the update after two failed sends")
	got := rec.all()
	if len(got) != 1 || got[0][0].ID != "a" || got[0][0].ClientStatus != structs.AllocClientStatusFailed {
		t.Fatalf("batches = %v; want the failed update delivered once", got)
	}
}

func TestUpdateBatcherFlushesAtShutdown(t *testing.T) {
	rec := &batchRecorder{sent: make(chan struct{}, 16)}
	b := newUpdateBatcher(rec.send, time.Hour, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.run(ctx)
	}()
	b.Enqueue(upd("a", structs.AllocClientStatusRunning))
	cancel()
	<-done
	if got := rec.all(); len(got) != 1 || got[0][0].ID != "a" {
		t.Fatalf("batches = %v; want the pending update flushed at shutdown", got)
	}
}

func TestBackoff(t *testing.T) {
	b := backoff{Base: time.Second, Max: 5 * time.Second}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 40: 5 * time.Second} {
		if got := b.next(n); got != want {
			t.Errorf("next(%d) = %v; want %v", n, got, want)
		}
	}
}

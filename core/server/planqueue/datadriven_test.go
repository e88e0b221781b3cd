package planqueue

// Scripted tests of the plan queue (testdata/*.txt, run with
// github.com/cockroachdb/datadriven; `go test -run TestDataDriven -rewrite`
// regenerates the expected output, which must then be read and checked).
//
// Each script starts with an enabled queue. Plans are named by their
// EvalID; the queue has no timing behaviour (EnqueueTime is informative
// only), so nothing here needs a clock.
//
// Commands:
//
//	enqueue eval=E [priority=N]
//	    Enqueue a plan (priority 50); its Future is kept under E
//	enqueue-nil
//	dequeue
//	    a Dequeue that does not block: the plan handed to the applier, or
//	    "none queued"
//	wait-dequeue name=W
//	    a Dequeue that blocks in a goroutine (waits until the queue counts it)
//	result name=W
//	    what the blocked Dequeue W returned (waits for it, with a deadline)
//	respond eval=E [alloc-index=N] [error=MSG]
//	    the applier's Respond to the dequeued plan E
//	future eval=E
//	    the submitter's view: "waiting", or the result it got
//	enable | disable
//	state
//	    the queued plans in dequeue order, and the blocked Dequeue callers
//	stats
//	    Stats()

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/drover-org/drover/core/structs"
)

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &ddQueue{q: New(), futures: map[string]*Pending{}, waits: map[string]chan ddDequeued{}}
		h.q.SetEnabled(true)
		defer h.close(t)
		datadriven.RunTest(t, path, h.run)
	})
}

type ddDequeued struct {
	p   *Pending
	err error
}

type ddQueue struct {
	q         *Queue
	futures   map[string]*Pending // by eval ID, as the submitter holds them
	dequeued  map[string]*Pending // by eval ID, as the applier holds them
	waits     map[string]chan ddDequeued
	cancelers []context.CancelFunc
}

// close ends every blocked Dequeue so that goleak finds nothing.
func (h *ddQueue) close(t *testing.T) {
	h.q.SetEnabled(false)
	for _, c := range h.cancelers {
		c()
	}
	for name, ch := range h.waits {
		h.recv(t, ch)
		delete(h.waits, name)
	}
}

func (h *ddQueue) recv(t *testing.T, ch chan ddDequeued) ddDequeued {
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Dequeue did not return")
		return ddDequeued{}
	}
}

func (h *ddQueue) took(p *Pending, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	if h.dequeued == nil {
		h.dequeued = map[string]*Pending{}
	}
	h.dequeued[p.Plan.EvalID] = p
	return fmt.Sprintf("plan %s priority=%d\n", p.Plan.EvalID, p.Plan.Priority)
}

func (h *ddQueue) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "enqueue", "enqueue-nil":
		var p *structs.Plan
		if d.Cmd == "enqueue" {
			p = &structs.Plan{Priority: 50}
			d.ScanArgs(t, "eval", &p.EvalID)
			d.MaybeScanArgs(t, "priority", &p.Priority)
		}
		f, err := h.q.Enqueue(p)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		h.futures[p.EvalID] = f.(*Pending)
		return fmt.Sprintf("queued, depth %d\n", h.q.Stats().Depth)
	case "dequeue":
		// Dequeue only blocks on an empty, enabled queue: the script is
		// the only caller, so checking first keeps it from blocking.
		if h.q.Enabled() && h.q.Stats().Depth == 0 {
			return "none queued\n"
		}
		return h.took(h.q.Dequeue(context.Background()))
	case "wait-dequeue":
		var name string
		d.ScanArgs(t, "name", &name)
		before := h.q.Stats().DequeueWaiters
		ctx, cancel := context.WithCancel(context.Background())
		h.cancelers = append(h.cancelers, cancel)
		ch := make(chan ddDequeued, 1)
		h.waits[name] = ch
		go func() {
			p, err := h.q.Dequeue(ctx)
			ch <- ddDequeued{p, err}
		}()
		waitFor(t, "a blocked Dequeue", func() bool { return h.q.Stats().DequeueWaiters == before+1 })
		return name + " blocked\n"
	case "result":
		var name string
		d.ScanArgs(t, "name", &name)
		ch, ok := h.waits[name]
		if !ok {
			d.Fatalf(t, "no blocked dequeue %q", name)
		}
		delete(h.waits, name)
		r := h.recv(t, ch)
		return h.took(r.p, r.err)
	case "respond":
		var eval, msg string
		d.ScanArgs(t, "eval", &eval)
		p, ok := h.dequeued[eval]
		if !ok {
			d.Fatalf(t, "plan %q was not dequeued", eval)
		}
		var res *structs.PlanResult
		var err error
		if d.MaybeScanArgs(t, "error", &msg) {
			err = errors.New(msg)
		} else {
			res = &structs.PlanResult{}
			d.MaybeScanArgs(t, "alloc-index", &res.AllocIndex)
		}
		p.Respond(res, err)
		return "ok\n"
	case "future":
		var eval string
		d.ScanArgs(t, "eval", &eval)
		f, ok := h.futures[eval]
		if !ok {
			d.Fatalf(t, "no future for %q", eval)
		}
		select {
		case <-f.done:
		default:
			return "waiting\n"
		}
		res, err := f.Wait(context.Background())
		switch {
		case errors.Is(err, ErrFlushed):
			return "error (ErrFlushed): " + err.Error() + "\n"
		case err != nil:
			return "error: " + err.Error() + "\n"
		}
		return fmt.Sprintf("result alloc-index=%d\n", res.AllocIndex)
	case "enable":
		h.q.SetEnabled(true)
		return "ok\n"
	case "disable":
		h.q.SetEnabled(false)
		return "ok\n"
	case "state":
		h.q.mu.Lock()
		defer h.q.mu.Unlock()
		var out strings.Builder
		if !h.q.enabled {
			out.WriteString("disabled\n")
		}
		ps := slices.Clone(h.q.heap)
		slices.SortFunc(ps, func(a, b *Pending) int {
			if (pendingHeap{a, b}).Less(0, 1) {
				return -1
			}
			return 1
		})
		if len(ps) == 0 {
			out.WriteString("queue empty\n")
		}
		for i, p := range ps {
			fmt.Fprintf(&out, "%d: %s priority=%d seq=%d\n", i+1, p.Plan.EvalID, p.Plan.Priority, p.seq)
		}
		fmt.Fprintf(&out, "waiters=%d\n", h.q.waiters)
		return out.String()
	case "stats":
		s := h.q.Stats()
		return fmt.Sprintf("depth=%d waiters=%d\n", s.Depth, s.DequeueWaiters)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

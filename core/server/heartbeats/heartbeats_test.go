package heartbeats

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeTimer fires only when the test says so.
type fakeTimer struct {
	c       *clock
	d       time.Duration
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// clock records the timers started, by node order of arming.
type clock struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

func (c *clock) afterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, d: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

// live returns the timers not stopped.
func (c *clock) live() []*fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped {
			out = append(out, t)
		}
	}
	return out
}

type nodes struct {
	mu      sync.Mutex
	byID    map[string]*structs.Node
	failAll bool
	failOne error
	down    []string
}

func (n *nodes) list() ([]*structs.Node, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failAll {
		return nil, errors.New("read failed")
	}
	var out []*structs.Node
	for _, x := range n.byID {
		out = append(out, x.Copy())
	}
	return out, nil
}

func (n *nodes) get(id string) (*structs.Node, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.failOne != nil {
		err := n.failOne
		n.failOne = nil
		return nil, err
	}
	if x := n.byID[id]; x != nil {
		return x.Copy(), nil
	}
	return nil, nil
}

func (n *nodes) markDown(x *structs.Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = append(n.down, x.ID)
	n.byID[x.ID].Status = structs.NodeStatusDown
	return nil
}

func (n *nodes) marked() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.down)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

type harness struct {
	clock *clock
	nodes *nodes
	tr    *Tracker
	stop  func()
}

func start(t *testing.T, ns map[string]*structs.Node, failAll bool) *harness {
	t.Helper()
	h := &harness{clock: &clock{}, nodes: &nodes{byID: ns, failAll: failAll}}
	h.tr = New(Config{
		TTL: 10 * time.Second, Grace: 5 * time.Second,
		Nodes: h.nodes.list, Node: h.nodes.get, MarkDown: h.nodes.markDown,
		AfterFunc: h.clock.afterFunc, Retry: 10 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.tr.Run(ctx) }()
	h.stop = func() { cancel(); <-done }
	t.Cleanup(h.stop)
	return h
}

func node(id, status string) *structs.Node { return &structs.Node{ID: id, Status: status} }

// At step-up every node that is not down gets a timer of TTL plus grace;
// one that lapses marks its node down, once.
func TestArmAndMarkDown(t *testing.T) {
	h := start(t, map[string]*structs.Node{
		"a": node("a", structs.NodeStatusReady), "b": node("b", structs.NodeStatusDown),
	}, false)
	waitFor(t, "a's timer", func() bool { return len(h.clock.live()) == 1 })
	tm := h.clock.live()[0]
	if tm.d != 15*time.Second {
		t.Fatalf("timer of %s, want TTL+grace 15s", tm.d)
	}
	tm.f()
	waitFor(t, "a marked down", func() bool { return len(h.nodes.marked()) == 1 })
	tm.f() // a second lapse of a down node writes nothing
	h.tr.Reset("a")
	h.clock.live()[0].f()
	h.stop()
	if got := h.nodes.marked(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("marked down %v, want [a]", got)
	}
}

// A heartbeat restarts the node's timer: the old one is stopped.
func TestResetReplacesTimer(t *testing.T) {
	h := start(t, map[string]*structs.Node{"a": node("a", structs.NodeStatusReady)}, false)
	waitFor(t, "a's timer", func() bool { return len(h.clock.live()) == 1 })
	first := h.clock.live()[0]
	h.tr.Reset("a")
	live := h.clock.live()
	if len(live) != 1 || live[0] == first {
		t.Fatalf("after a reset: %d live timers, first still live: %v", len(live), len(live) == 1 && live[0] == first)
	}
}

// A failed read of the nodes at step-up is retried until it succeeds.
func TestArmRetriesFailedRead(t *testing.T) {
	h := start(t, map[string]*structs.Node{"a": node("a", structs.NodeStatusReady)}, true)
	if n := len(h.clock.live()); n != 0 {
		t.Fatalf("%d timers armed from a failed read", n)
	}
	h.nodes.mu.Lock()
	h.nodes.failAll = false
	h.nodes.mu.Unlock()
	waitFor(t, "a's timer after the retry", func() bool { return len(h.clock.live()) == 1 })
}

// A failed read of a lapsed node arms its timer again.
func TestInvalidateReadFailureRearms(t *testing.T) {
	h := start(t, map[string]*structs.Node{"a": node("a", structs.NodeStatusReady)}, false)
	waitFor(t, "a's timer", func() bool { return len(h.clock.live()) == 1 })
	h.nodes.mu.Lock()
	h.nodes.failOne = errors.New("read failed")
	h.nodes.mu.Unlock()
	first := h.clock.live()[0]
	first.f()
	waitFor(t, "a re-armed", func() bool {
		live := h.clock.live()
		return len(live) == 2 || (len(live) == 1 && live[0] != first)
	})
	if got := h.nodes.marked(); len(got) != 0 {
		t.Fatalf("marked down %v after a failed read", got)
	}
}

// When Run returns (step-down) every timer stops, and Reset does nothing.
func TestStopDropsTimers(t *testing.T) {
	h := start(t, map[string]*structs.Node{
		"a": node("a", structs.NodeStatusReady), "b": node("b", structs.NodeStatusInit),
	}, false)
	waitFor(t, "both timers", func() bool { return len(h.clock.live()) == 2 })
	h.stop()
	if n := len(h.clock.live()); n != 0 {
		t.Fatalf("%d timers live after Run returned", n)
	}
	h.tr.Reset("a")
	if n := len(h.clock.live()); n != 0 {
		t.Fatalf("Reset armed a timer while not running (%d)", n)
	}
}

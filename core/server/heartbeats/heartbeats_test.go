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
		MinTTL: 10 * time.Second, Grace: 5 * time.Second, FailoverTTL: time.Minute,
		Stagger: func(time.Duration) time.Duration { return 0 },
		Nodes:   h.nodes.list, Node: h.nodes.get, MarkDown: h.nodes.markDown,
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

// At step-up every node that is not down gets a timer of the failover TTL;
// one that lapses marks its node down, once.
func TestArmAndMarkDown(t *testing.T) {
	h := start(t, map[string]*structs.Node{
		"a": node("a", structs.NodeStatusReady), "b": node("b", structs.NodeStatusDown),
	}, false)
	waitFor(t, "a's timer", func() bool { return len(h.clock.live()) == 1 })
	tm := h.clock.live()[0]
	if tm.d != time.Minute {
		t.Fatalf("timer of %s at step-up, want the failover TTL 1m", tm.d)
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

func TestScaledTTL(t *testing.T) {
	for _, tc := range []struct {
		min  time.Duration
		rate float64
		n    int
		want time.Duration
	}{
		{10 * time.Second, 50, 0, 10 * time.Second},
		{10 * time.Second, 50, 1, 10 * time.Second},
		{10 * time.Second, 50, 500, 10 * time.Second},
		{10 * time.Second, 50, 501, 10020 * time.Millisecond},
		{10 * time.Second, 50, 10000, 200 * time.Second},
		{10 * time.Second, 0.5, 100, 200 * time.Second},
		{time.Second, 0, 10000, time.Second}, // no rate: the floor
	} {
		if got := ScaledTTL(tc.min, tc.rate, tc.n); got != tc.want {
			t.Errorf("ScaledTTL(%s, %v, %d) = %s, want %s", tc.min, tc.rate, tc.n, got, tc.want)
		}
	}
}

// The TTL a heartbeat returns grows with the nodes tracked, plus the
// stagger; the node's timer is that TTL plus the grace.
func TestResetScalesWithFleet(t *testing.T) {
	c := &clock{}
	var staggered []time.Duration
	tr := New(Config{
		MinTTL: 10 * time.Second, Grace: 5 * time.Second, MaxPerSecond: 50,
		Stagger:  func(d time.Duration) time.Duration { staggered = append(staggered, d); return d / 4 },
		Nodes:    func() ([]*structs.Node, error) { return nil, nil },
		Node:     func(string) (*structs.Node, error) { return nil, nil },
		MarkDown: func(*structs.Node) error { return nil }, AfterFunc: c.afterFunc,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// Reset before Run enabled the tracker arms nothing; wait for Run.
	waitFor(t, "the tracker to run", func() bool { tr.Reset("probe"); return tr.Nodes() == 1 })

	var ttl time.Duration
	for i := 1; i < 1000; i++ {
		ttl = tr.Reset(string(rune('a'+i%26)) + time.Duration(i).String())
	}
	if n := tr.Nodes(); n != 1000 {
		t.Fatalf("%d nodes tracked, want 1000", n)
	}
	// 1,000 nodes at 50/s: 20 s, plus the stagger of a quarter of it.
	if want := 25 * time.Second; ttl != want {
		t.Fatalf("TTL at 1,000 nodes %s, want %s", ttl, want)
	}
	if last := staggered[len(staggered)-1]; last != 20*time.Second {
		t.Fatalf("stagger drawn below %s, want below the scaled TTL 20s", last)
	}
	// A heartbeat of a known node does not count it twice.
	if again := tr.Reset("probe"); again != ttl {
		t.Fatalf("TTL of a known node's heartbeat %s, want %s", again, ttl)
	}
	live := c.live()
	if len(live) != 1000 {
		t.Fatalf("%d live timers, want 1000", len(live))
	}
	if d := live[len(live)-1].d; d != 25*time.Second+5*time.Second {
		t.Fatalf("the last timer is %s, want TTL+grace 30s", d)
	}
}

// The default stagger stays in [0, d): a TTL is at least the scaled one
// and under twice it.
func TestDefaultStagger(t *testing.T) {
	tr := New(Config{MinTTL: time.Second})
	for range 200 {
		if ttl := tr.Reset("a"); ttl < time.Second || ttl >= 2*time.Second {
			t.Fatalf("TTL %s outside [1s, 2s)", ttl)
		}
	}
	if d := New(Config{}).cfg; d.MinTTL != DefaultMinTTL || d.MaxPerSecond != DefaultMaxPerSecond || d.FailoverTTL != DefaultFailoverTTL {
		t.Fatalf("defaults %s %v %s", d.MinTTL, d.MaxPerSecond, d.FailoverTTL)
	}
}

// After step-up a node's heartbeat replaces its failover timer with its
// own TTL; a node that never heartbeats is marked down only after the
// failover TTL.
func TestFailoverThenHeartbeat(t *testing.T) {
	h := start(t, map[string]*structs.Node{
		"a": node("a", structs.NodeStatusReady), "b": node("b", structs.NodeStatusReady),
	}, false)
	waitFor(t, "both failover timers", func() bool { return len(h.clock.live()) == 2 })
	for _, tm := range h.clock.live() {
		if tm.d != time.Minute {
			t.Fatalf("step-up timer %s, want 1m", tm.d)
		}
	}
	if ttl := h.tr.Reset("a"); ttl != 10*time.Second {
		t.Fatalf("heartbeat TTL %s, want the floor 10s", ttl)
	}
	var aTimer, bTimer *fakeTimer
	for _, tm := range h.clock.live() {
		if tm.d == 15*time.Second {
			aTimer = tm
		} else {
			bTimer = tm
		}
	}
	if aTimer == nil || bTimer == nil {
		t.Fatalf("after a's heartbeat: want one timer of TTL+grace and b's failover one")
	}
	bTimer.f()
	waitFor(t, "b marked down", func() bool { return len(h.nodes.marked()) == 1 })
	if got := h.nodes.marked(); got[0] != "b" {
		t.Fatalf("marked down %v, want [b]", got)
	}
}

// A timer that fires after a heartbeat replaced it marks nothing down.
func TestReplacedTimerLapseIgnored(t *testing.T) {
	h := start(t, map[string]*structs.Node{"a": node("a", structs.NodeStatusReady)}, false)
	waitFor(t, "a's timer", func() bool { return len(h.clock.live()) == 1 })
	old := h.clock.live()[0]
	h.tr.Reset("a")
	old.f() // fired as it was replaced
	h.tr.mu.Lock()
	expired, tracked := len(h.tr.expired), h.tr.timers["a"] != nil
	h.tr.mu.Unlock()
	if expired != 0 || !tracked {
		t.Fatalf("a replaced timer's lapse counted: %d expired, a tracked %v", expired, tracked)
	}
	h.stop()
	if got := h.nodes.marked(); len(got) != 0 {
		t.Fatalf("marked down %v after a replaced timer lapsed", got)
	}
}

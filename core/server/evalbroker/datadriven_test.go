package evalbroker

// Scripted tests of the broker's state machine (testdata/*.txt, run with
// github.com/cockroachdb/datadriven; `go test -run TestDataDriven -rewrite`
// regenerates the expected output, which must then be read and checked).
//
// Each script starts with a fresh enabled broker on a fake clock that only
// moves with `tick`, with NackTimeout 60s, InitialNackDelay 1s,
// SubsequentNackDelay 20s and DeliveryLimit 3 unless `init` says otherwise.
// Times print as offsets from the script's start ("+65s"). Tokens print as
// t1, t2, ... in the order the broker handed them out.
//
// Commands:
//
//	init [nack-timeout=D] [initial-nack-delay=D] [subsequent-nack-delay=D] [delivery-limit=N]
//	    a fresh broker (the old one is disabled), clock back at +0s
//	enqueue id=ID [job=JOB] [ns=NS] [type=T] [priority=N] [index=N] [wait=D] [wait-until=D]
//	    Enqueue an eval (type service, priority 50, ns default; index is its
//	    CreateIndex, default 0; wait-until is an offset from the start);
//	    prints the eval's state, or only "ID enqueued" while a wait-dequeue
//	    has not been collected with `result` (it may take the eval at once)
//	enqueue-all ids=(ID,...) [same options, applied to each]
//	dequeue types=(T,...)
//	    a non-blocking Dequeue: the delivered eval and its token, or "none ready"
//	dequeue-func admit=(T,...)
//	    DequeueFunc admitting the listed types, without blocking
//	wait-dequeue name=W types=(T,...)
//	    a Dequeue that blocks in a goroutine (waits until the broker counts it)
//	result name=W
//	    what the blocked Dequeue W returned (waits for it, with a deadline)
//	ack|nack|reset|pause|resume id=ID [token=tN]
//	    Ack, Nack, OutstandingReset, PauseNackTimeout, ResumeNackTimeout with
//	    the eval's latest token, or the one named
//	requeue id=ID [token=tN] [delay=D]
//	tick D
//	    advance the clock by D and fire every deadline that came due
//	cancelable [max=N]
//	    drain superseded evals
//	enable | disable
//	state
//	    every eval the broker holds, by where it is (ready queues in
//	    delivery order), the job slots ("ns/job=E": E holds the job's
//	    slot; "ns/job<-E": E waits for it), re-enqueues waiting for an
//	    ack, cancelable evals and idleness
//	stats
//	    Stats()

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/drover-org/drover/core/structs"
)

func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		h := &ddBroker{t: t}
		h.init(testConfig(nil))
		defer h.close()
		datadriven.RunTest(t, path, h.run)
	})
}

// ddBroker is one script's broker, clock and names.
type ddBroker struct {
	t      *testing.T
	clock  *fakeClock
	start  time.Time
	b      *Broker
	tokens map[string]string // token -> tN
	latest map[string]string // eval ID -> latest token
	ntok   int
	wait   map[string]<-chan dequeueResult
	cancel []context.CancelFunc
}

func (h *ddBroker) init(cfg Config) {
	h.close()
	h.clock = newFakeClock()
	h.start = h.clock.Now()
	cfg.Clock = h.clock
	h.b = New(cfg, nil)
	h.b.SetEnabled(true)
	h.tokens = map[string]string{}
	h.latest = map[string]string{}
	h.ntok = 0
	h.wait = map[string]<-chan dequeueResult{}
}

// close disables the broker, which ends its timer goroutine and every
// blocked Dequeue, so that goleak finds nothing.
func (h *ddBroker) close() {
	if h.b != nil {
		h.b.SetEnabled(false)
	}
	for _, c := range h.cancel {
		c()
	}
	h.cancel = nil
	for name, ch := range h.wait {
		recvResult(h.t, ch)
		delete(h.wait, name)
	}
}

func (h *ddBroker) rel(at time.Time) string {
	return "+" + at.Sub(h.start).String()
}

func (h *ddBroker) tokenName(token string) string {
	if token == "" {
		return "-"
	}
	if n, ok := h.tokens[token]; ok {
		return n
	}
	h.ntok++
	n := fmt.Sprintf("t%d", h.ntok)
	h.tokens[token] = n
	return n
}

// token resolves the token of a command: token=tN, else the eval's latest.
func (h *ddBroker) token(t *testing.T, d *datadriven.TestData, id string) string {
	var name string
	if !d.MaybeScanArgs(t, "token", &name) {
		return h.latest[id]
	}
	for tok, n := range h.tokens {
		if n == name {
			return tok
		}
	}
	return "unknown-" + name
}

func result(err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return "ok\n"
}

func (h *ddBroker) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "init":
		cfg := testConfig(nil)
		d.MaybeScanArgs(t, "nack-timeout", &cfg.NackTimeout)
		d.MaybeScanArgs(t, "initial-nack-delay", &cfg.InitialNackDelay)
		d.MaybeScanArgs(t, "subsequent-nack-delay", &cfg.SubsequentNackDelay)
		d.MaybeScanArgs(t, "delivery-limit", &cfg.DeliveryLimit)
		h.init(cfg)
		return "ok\n"
	case "enqueue":
		var id string
		d.ScanArgs(t, "id", &id)
		h.b.Enqueue(h.eval(t, d, id))
		if len(h.wait) > 0 {
			// A blocked Dequeue may take the eval at any moment: its
			// state now is a race, so only `result` and `state` tell.
			return id + " enqueued\n"
		}
		return h.stateOf(id)
	case "enqueue-all":
		var ids []string
		d.ScanArgs(t, "ids", &ids)
		evs := make([]*structs.Evaluation, 0, len(ids))
		for _, id := range ids {
			evs = append(evs, h.eval(t, d, id))
		}
		h.b.EnqueueAll(evs)
		var out strings.Builder
		for _, id := range ids {
			out.WriteString(h.stateOf(id))
		}
		return out.String()
	case "dequeue":
		var types []string
		d.MaybeScanArgs(t, "types", &types)
		ev, token, err := h.tryDequeue(types)
		return h.delivered(ev, token, err)
	case "dequeue-func":
		var admit []string
		d.ScanArgs(t, "admit", &admit)
		ok := func(typ string) bool { return slices.Contains(admit, typ) }
		// DequeueFunc blocks when nothing admissible is ready: look first
		// (the script is the only caller).
		h.b.mu.Lock()
		ready := false
		for typ, hp := range h.b.ready {
			ready = ready || (typ != FailedQueue && hp.Len() > 0 && ok(typ))
		}
		enabled := h.b.enabled
		h.b.mu.Unlock()
		if enabled && !ready {
			return "none ready\n"
		}
		ev, token, err := h.b.DequeueFunc(context.Background(), ok)
		return h.delivered(ev, token, err)
	case "wait-dequeue":
		var name string
		var types []string
		d.ScanArgs(t, "name", &name)
		d.ScanArgs(t, "types", &types)
		before := h.b.Stats().DequeueWaiters
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = append(h.cancel, cancel)
		h.wait[name] = dequeueAsync(ctx, h.b, types...)
		waitWaiters(t, h.b, before+1)
		return fmt.Sprintf("%s blocked\n", name)
	case "result":
		var name string
		d.ScanArgs(t, "name", &name)
		ch, ok := h.wait[name]
		if !ok {
			d.Fatalf(t, "no blocked dequeue %q", name)
		}
		delete(h.wait, name)
		r := recvResult(t, ch)
		return h.delivered(r.ev, r.token, r.err)
	case "ack", "nack", "reset", "pause", "resume", "requeue":
		var id string
		d.ScanArgs(t, "id", &id)
		tok := h.token(t, d, id)
		var err error
		switch d.Cmd {
		case "ack":
			err = h.b.Ack(id, tok)
		case "nack":
			err = h.b.Nack(id, tok)
		case "reset":
			err = h.b.OutstandingReset(id, tok)
		case "pause":
			err = h.b.PauseNackTimeout(id, tok)
		case "resume":
			err = h.b.ResumeNackTimeout(id, tok)
		case "requeue":
			var delay time.Duration
			d.MaybeScanArgs(t, "delay", &delay)
			err = h.b.Requeue(id, tok, delay)
		}
		if err != nil {
			return result(err)
		}
		return h.stateOf(id)
	case "tick":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "usage: tick <duration>")
		}
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "tick: %v", err)
		}
		h.clock.Advance(dur)
		// The timer goroutine fires the same deadlines; whichever takes
		// the lock first does it, so the state below is settled.
		h.b.mu.Lock()
		h.b.fireDueLocked()
		h.b.mu.Unlock()
		return fmt.Sprintf("clock %s\n", h.rel(h.clock.Now()))
	case "cancelable":
		var max int
		d.MaybeScanArgs(t, "max", &max)
		evs := h.b.Cancelable(max)
		if len(evs) == 0 {
			return "none\n"
		}
		var ids []string
		for _, ev := range evs {
			ids = append(ids, ev.ID)
		}
		return strings.Join(ids, " ") + "\n"
	case "enable":
		h.b.SetEnabled(true)
		return "ok\n"
	case "disable":
		h.b.SetEnabled(false)
		return "ok\n"
	case "state":
		return h.state()
	case "stats":
		return h.stats()
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (h *ddBroker) eval(t *testing.T, d *datadriven.TestData, id string) *structs.Evaluation {
	ev := &structs.Evaluation{ID: id, Namespace: "default", Type: "service", Priority: 50,
		Status: structs.EvalStatusPending}
	d.MaybeScanArgs(t, "job", &ev.JobID)
	d.MaybeScanArgs(t, "ns", &ev.Namespace)
	d.MaybeScanArgs(t, "type", &ev.Type)
	d.MaybeScanArgs(t, "priority", &ev.Priority)
	d.MaybeScanArgs(t, "index", &ev.CreateIndex)
	d.MaybeScanArgs(t, "wait", &ev.Wait)
	var until time.Duration
	if d.MaybeScanArgs(t, "wait-until", &until) {
		ev.WaitUntil = h.start.Add(until)
	}
	return ev
}

// tryDequeue is Dequeue that never blocks: with nothing ready it returns
// (nil, "", nil). A disabled broker and an empty type list take the real
// path, which fails at once.
func (h *ddBroker) tryDequeue(types []string) (*structs.Evaluation, string, error) {
	b := h.b
	b.mu.Lock()
	if !b.enabled || len(types) == 0 {
		b.mu.Unlock()
		return b.Dequeue(context.Background(), types)
	}
	defer b.mu.Unlock()
	e := b.dequeueLocked(types)
	if e == nil {
		return nil, "", nil
	}
	return e.eval, e.token, nil
}

func (h *ddBroker) delivered(ev *structs.Evaluation, token string, err error) string {
	switch {
	case err != nil:
		return result(err)
	case ev == nil:
		return "none ready\n"
	}
	h.latest[ev.ID] = token
	h.b.mu.Lock()
	deliveries := 0
	if e := h.b.evals[ev.ID]; e != nil {
		deliveries = e.deliveries
	}
	h.b.mu.Unlock()
	return fmt.Sprintf("%s token=%s delivery=%d\n", ev.ID, h.tokenName(token), deliveries)
}

var stateNames = map[evalState]string{
	stateReady:   "ready",
	stateUnacked: "unacked",
	statePending: "pending",
	stateWaiting: "waiting",
	stateDelayed: "delayed",
}

// describe is one eval's line: where it is and what it waits for.
func (h *ddBroker) describe(e *entry) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s %s", e.eval.ID, stateNames[e.state])
	if e.queue != e.eval.Type {
		fmt.Fprintf(&s, " queue=%s", e.queue)
	}
	switch e.state {
	case stateUnacked:
		fmt.Fprintf(&s, " token=%s", h.tokenName(e.token))
		if e.paused {
			s.WriteString(" nack-timer=paused")
		} else {
			fmt.Fprintf(&s, " nack-at=%s", h.rel(e.due))
		}
	case stateWaiting, stateDelayed:
		fmt.Fprintf(&s, " until=%s", h.rel(e.due))
	}
	fmt.Fprintf(&s, " deliveries=%d", e.deliveries)
	return s.String()
}

func (h *ddBroker) stateOf(id string) string {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	e, ok := h.b.evals[id]
	if !ok {
		return id + " not held\n"
	}
	return h.describe(e) + "\n"
}

func (h *ddBroker) state() string {
	b := h.b
	b.mu.Lock()
	defer b.mu.Unlock()
	var out strings.Builder
	if !b.enabled {
		out.WriteString("disabled\n")
	}
	fmt.Fprintf(&out, "clock %s\n", h.rel(b.clock.Now()))

	queues := make([]string, 0, len(b.ready))
	for q, hp := range b.ready {
		if hp.Len() > 0 {
			queues = append(queues, q)
		}
	}
	sort.Strings(queues)
	for _, q := range queues {
		es := slices.Clone(*b.ready[q])
		slices.SortFunc(es, func(x, y *entry) int {
			if readyBefore(x, y) {
				return -1
			}
			return 1
		})
		var ids []string
		for _, e := range es {
			ids = append(ids, fmt.Sprintf("%s(p%d,i%d)", e.eval.ID, e.eval.Priority, e.eval.CreateIndex))
		}
		fmt.Fprintf(&out, "ready %s: %s\n", q, strings.Join(ids, " "))
	}

	ids := make([]string, 0, len(b.evals))
	for id, e := range b.evals {
		if e.state != stateReady {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(&out, "%s\n", h.describe(b.evals[id]))
	}

	var jobs []string
	for k, e := range b.jobs {
		jobs = append(jobs, fmt.Sprintf("%s/%s=%s", k.ns, k.id, e.eval.ID))
	}
	for k, e := range b.pending {
		jobs = append(jobs, fmt.Sprintf("%s/%s<-%s", k.ns, k.id, e.eval.ID))
	}
	sort.Strings(jobs)
	if len(jobs) > 0 {
		fmt.Fprintf(&out, "jobs: %s\n", strings.Join(jobs, " "))
	}
	var rq []string
	for tok, ev := range b.requeue {
		rq = append(rq, fmt.Sprintf("%s after ack of %s", ev.ID, h.tokenName(tok)))
	}
	sort.Strings(rq)
	for _, r := range rq {
		fmt.Fprintf(&out, "re-enqueue %s\n", r)
	}
	if len(b.cancelable) > 0 {
		var c []string
		for _, ev := range b.cancelable {
			c = append(c, ev.ID)
		}
		fmt.Fprintf(&out, "cancelable: %s\n", strings.Join(c, " "))
	}
	if b.working == 0 {
		fmt.Fprintf(&out, "idle since %s\n", h.rel(b.idleSince))
	} else {
		fmt.Fprintf(&out, "working %d\n", b.working)
	}
	return out.String()
}

func (h *ddBroker) stats() string {
	s := h.b.Stats()
	var out strings.Builder
	fmt.Fprintf(&out, "ready=%d unacked=%d blocked=%d waiting=%d delayed=%d failed=%d cancelable=%d waiters=%d\n",
		s.TotalReady, s.TotalUnacked, s.TotalBlocked, s.TotalWaiting, s.TotalDelayed, s.TotalFailed,
		s.TotalCancelable, s.DequeueWaiters)
	types := make([]string, 0, len(s.ByType))
	for typ := range s.ByType {
		types = append(types, typ)
	}
	sort.Strings(types)
	for _, typ := range types {
		ts := s.ByType[typ]
		fmt.Fprintf(&out, "  %s: ready=%d unacked=%d\n", typ, ts.Ready, ts.Unacked)
	}
	return out.String()
}

// Package evalbroker is the leader's at-least-once queue of evaluations for
// the scheduler workers.
//
// An eval handed out by Dequeue stays "unacked" until its worker Acks it.
// A worker that gives up Nacks it; a worker that dies is detected by the nack
// timer, which Nacks on its behalf. Nacked evals come back after a delay and,
// once they have been delivered DeliveryLimit times, move to FailedQueue,
// from which the leader takes them to mark them failed.
//
// At most one eval per job (namespace, job ID) is ready or unacked at a time,
// so two workers never schedule the same job concurrently from different
// snapshots. Evals that arrive for a busy job wait; only the best of them is
// kept and the rest are offered to the leader for cancellation (Cancelable).
//
// The broker lives only on the leader: SetEnabled(true) on step-up,
// SetEnabled(false) on step-down, which forgets everything (the next leader
// rebuilds the queue from state).
package evalbroker

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// FailedQueue is the pseudo eval type of evals that reached the delivery
// limit. The leader dequeues from it, marks the evals failed and acks them.
const FailedQueue = "_failed"

// Errors the callers act on.
var (
	// ErrNotEnabled: the broker is disabled (this server is not, or no
	// longer, the leader).
	ErrNotEnabled = errors.New("eval broker disabled")
	// ErrNotOutstanding: the eval is not currently delivered to anyone,
	// typically because its nack timer fired and it was redelivered.
	ErrNotOutstanding = errors.New("evaluation is not outstanding")
	// ErrTokenMismatch: the eval is outstanding under another token, i.e.
	// with another worker.
	ErrTokenMismatch = errors.New("evaluation token does not match")
	// ErrNoTypes: Dequeue was called without any eval type.
	ErrNoTypes = errors.New("no eval types to dequeue")
)

// Defaults for the zero Config fields.
const (
	DefaultNackTimeout         = 60 * time.Second
	DefaultInitialNackDelay    = time.Second
	DefaultSubsequentNackDelay = 20 * time.Second
	DefaultDeliveryLimit       = 3
)

// Config tunes the broker. Zero fields take the defaults above; a negative
// nack delay means "redeliver at once".
type Config struct {
	// NackTimeout is how long a worker may hold an eval without Ack, Nack,
	// OutstandingReset or PauseNackTimeout before it is presumed dead.
	NackTimeout time.Duration
	// InitialNackDelay holds back an eval after its first delivery is nacked.
	InitialNackDelay time.Duration
	// SubsequentNackDelay holds back an eval after any later nack.
	SubsequentNackDelay time.Duration
	// DeliveryLimit is the number of deliveries after which a nacked eval
	// goes to FailedQueue instead of back to its own queue.
	DeliveryLimit int
	// Clock is the time source; nil means the wall clock.
	Clock Clock
}

func (c Config) withDefaults() Config {
	if c.NackTimeout <= 0 {
		c.NackTimeout = DefaultNackTimeout
	}
	switch {
	case c.InitialNackDelay == 0:
		c.InitialNackDelay = DefaultInitialNackDelay
	case c.InitialNackDelay < 0:
		c.InitialNackDelay = 0
	}
	switch {
	case c.SubsequentNackDelay == 0:
		c.SubsequentNackDelay = DefaultSubsequentNackDelay
	case c.SubsequentNackDelay < 0:
		c.SubsequentNackDelay = 0
	}
	if c.DeliveryLimit <= 0 {
		c.DeliveryLimit = DefaultDeliveryLimit
	}
	if c.Clock == nil {
		c.Clock = realClock{}
	}
	return c
}

// evalState is where an eval the broker holds currently is.
type evalState int

const (
	stateReady   evalState = iota // in a ready heap
	stateUnacked                  // delivered, awaiting Ack or Nack
	statePending                  // waiting for its job's outstanding eval
	stateWaiting                  // held back by a nack delay or Eval.Wait
	stateDelayed                  // held back until Eval.WaitUntil
)

// entry is the broker's record of one eval.
type entry struct {
	eval       *structs.Evaluation
	state      evalState
	queue      string // ready queue: the eval's Type, or FailedQueue
	seq        uint64 // admission order: FIFO tie-break and "newest"
	deliveries int
	token      string // set while unacked
	paused     bool   // nack timer paused while unacked
	working    bool   // counted in Broker.working
	due        time.Time
	timerIdx   int // slot in the timer heap, -1 when not armed
}

// jobKey identifies a job across namespaces.
type jobKey struct{ ns, id string }

func keyOf(ev *structs.Evaluation) jobKey { return jobKey{ev.Namespace, ev.JobID} }

// Broker is the eval broker. All methods are safe for concurrent use.
type Broker struct {
	cfg    Config
	clock  Clock
	logger hclog.Logger

	// lifecycle serialises SetEnabled so that a disable fully stops the
	// timer goroutine before a following enable starts a new one.
	lifecycle sync.Mutex

	mu      sync.Mutex
	enabled bool
	paused  bool          // deliveries paused (SetPaused)
	epoch   uint64        // bumped on every disable; Dequeue callers of an old epoch fail
	waiters int           // Dequeue callers currently blocked
	readyCh chan struct{} // closed (and replaced) when an eval becomes ready or on disable
	stop    chan struct{} // closed on disable: ends the timer loop
	kick    chan struct{} // wakes the timer loop when the earliest deadline moved earlier
	done    chan struct{} // closed by the timer loop when it returns

	evals      map[string]*entry              // every eval held, by ID
	ready      map[string]*readyHeap          // by queue name
	jobs       map[jobKey]*entry              // the eval holding each job's slot
	pending    map[jobKey]*entry              // the best eval waiting for each job's slot
	requeue    map[string]*structs.Evaluation // by token: enqueue again after that delivery is acked
	timers     timerHeap
	cancelable []*structs.Evaluation
	seq        uint64
	// working counts the evals ready for a worker (FailedQueue excluded)
	// or delivered to one; idleSince is when it last fell to zero.
	working   int
	idleSince time.Time
}

// New returns a disabled broker.
func New(cfg Config, logger hclog.Logger) *Broker {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	cfg = cfg.withDefaults()
	b := &Broker{cfg: cfg, clock: cfg.Clock, logger: logger, readyCh: make(chan struct{})}
	b.resetLocked()
	return b
}

func (b *Broker) resetLocked() {
	b.evals = make(map[string]*entry)
	b.ready = make(map[string]*readyHeap)
	b.jobs = make(map[jobKey]*entry)
	b.pending = make(map[jobKey]*entry)
	b.requeue = make(map[string]*structs.Evaluation)
	b.timers = nil
	b.cancelable = nil
	b.working = 0
	b.idleSince = b.clock.Now()
}

// trackLocked keeps Broker.working in step with e's state; every state
// change of an entry held in evals calls it.
func (b *Broker) trackLocked(e *entry) {
	want := e.queue != FailedQueue && (e.state == stateReady || e.state == stateUnacked)
	switch {
	case want && !e.working:
		b.working++
	case !want && e.working:
		b.working--
		if b.working == 0 {
			b.idleSince = b.clock.Now()
		}
	}
	e.working = want
}

// forgetLocked drops e from evals.
func (b *Broker) forgetLocked(e *entry) {
	delete(b.evals, e.eval.ID)
	e.state = statePending
	b.trackLocked(e)
}

// Idle reports whether no eval is ready for a worker or being scheduled by
// one (evals of FailedQueue, held back by time, or waiting for their job's
// outstanding eval do not count), and since when. Background work such as
// the garbage collector yields to scheduling through it. Ready evals of a
// paused broker count only once the pause ends: nothing schedules them.
func (b *Broker) Idle() (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.working == 0 || b.paused, b.idleSince
}

// SetEnabled starts the broker (with its timer goroutine) or stops it. Stopping
// forgets every eval and wakes every blocked Dequeue with ErrNotEnabled; it
// returns once the timer goroutine has exited. Repeating the current state is
// a no-op.
func (b *Broker) SetEnabled(on bool) {
	b.lifecycle.Lock()
	defer b.lifecycle.Unlock()

	b.mu.Lock()
	if on == b.enabled {
		b.mu.Unlock()
		return
	}
	b.enabled = on
	if on {
		b.stop = make(chan struct{})
		b.kick = make(chan struct{}, 1)
		b.done = make(chan struct{})
		go b.run(b.stop, b.kick, b.done)
		b.mu.Unlock()
		b.logger.Debug("eval broker enabled")
		return
	}
	dropped := len(b.evals)
	b.epoch++
	b.resetLocked()
	close(b.stop)
	b.broadcastLocked()
	done := b.done
	b.mu.Unlock()
	<-done
	b.logger.Debug("eval broker disabled", "evals_dropped", dropped)
}

// Enabled reports whether the broker is running.
func (b *Broker) Enabled() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.enabled
}

// Enqueue adds a pending eval. It is dropped while the broker is disabled.
// An eval ID the broker already holds is ignored, with one exception: if
// that eval is currently delivered (unacked), something changed while a
// worker was on it (e.g. a reblocked eval was unblocked again), so the new
// copy is delivered once the current delivery is acked; a nack drops it,
// since the nacked eval is redelivered anyway. The broker never mutates the
// eval; Dequeue hands out the same pointer.
func (b *Broker) Enqueue(ev *structs.Evaluation) {
	if ev == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	b.enqueueLocked(ev)
}

// EnqueueAll is Enqueue for many evals under one lock.
func (b *Broker) EnqueueAll(evs []*structs.Evaluation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.enabled {
		return
	}
	for _, ev := range evs {
		if ev != nil {
			b.enqueueLocked(ev)
		}
	}
}

func (b *Broker) enqueueLocked(ev *structs.Evaluation) {
	if e, ok := b.evals[ev.ID]; ok {
		if e.state == stateUnacked {
			b.requeue[e.token] = ev
			b.logger.Trace("eval re-enqueued while outstanding; will redeliver after ack", "eval_id", ev.ID)
		}
		return
	}
	e := &entry{eval: ev, queue: ev.Type, timerIdx: -1, seq: b.nextSeq()}
	b.evals[ev.ID] = e
	now := b.clock.Now()
	switch {
	case !ev.WaitUntil.IsZero() && ev.WaitUntil.After(now):
		e.state = stateDelayed
		b.armLocked(e, ev.WaitUntil)
	case ev.Wait > 0:
		e.state = stateWaiting
		b.armLocked(e, now.Add(ev.Wait))
	default:
		b.admitLocked(e)
	}
}

func (b *Broker) nextSeq() uint64 {
	b.seq++
	return b.seq
}

// admitLocked makes e ready if its job is free (or already held by e), else
// parks it as the job's pending eval, keeping only the better of two.
func (b *Broker) admitLocked(e *entry) {
	if e.eval.JobID == "" {
		b.pushReadyLocked(e)
		return
	}
	key := keyOf(e.eval)
	if holder := b.jobs[key]; holder == nil || holder == e {
		b.jobs[key] = e
		b.pushReadyLocked(e)
		return
	}
	e.state = statePending
	b.trackLocked(e)
	cur := b.pending[key]
	if cur == nil {
		b.pending[key] = e
		return
	}
	keep, drop := cur, e
	if pendingBetter(e, cur) {
		keep, drop = e, cur
	}
	b.pending[key] = keep
	b.forgetLocked(drop)
	b.cancelable = append(b.cancelable, drop.eval)
	b.logger.Debug("eval superseded by another pending eval of its job",
		"eval_id", drop.eval.ID, "kept_eval_id", keep.eval.ID, "job_id", key.id, "namespace", key.ns)
}

// pendingBetter picks which of two waiting evals of one job to deliver: the
// higher priority, then the newer one, since it was created from fresher state.
func pendingBetter(a, b *entry) bool {
	if a.eval.Priority != b.eval.Priority {
		return a.eval.Priority > b.eval.Priority
	}
	if a.eval.CreateIndex != b.eval.CreateIndex {
		return a.eval.CreateIndex > b.eval.CreateIndex
	}
	return a.seq > b.seq
}

func (b *Broker) pushReadyLocked(e *entry) {
	e.state = stateReady
	b.trackLocked(e)
	e.seq = b.nextSeq()
	h := b.ready[e.queue]
	if h == nil {
		h = &readyHeap{}
		b.ready[e.queue] = h
	}
	heap.Push(h, e)
	b.broadcastLocked()
}

// broadcastLocked wakes every blocked Dequeue so it looks again.
func (b *Broker) broadcastLocked() {
	close(b.readyCh)
	b.readyCh = make(chan struct{})
}

// releaseJobLocked frees e's job slot and promotes the job's pending eval.
func (b *Broker) releaseJobLocked(e *entry) {
	if e.eval.JobID == "" {
		return
	}
	key := keyOf(e.eval)
	if b.jobs[key] != e {
		return
	}
	delete(b.jobs, key)
	if p := b.pending[key]; p != nil {
		delete(b.pending, key)
		b.jobs[key] = p
		b.pushReadyLocked(p)
	}
}

// Dequeue blocks until an eval of one of types is ready and delivers it with
// a fresh token: the highest Priority across the types first, then the lowest
// CreateIndex. It returns ctx.Err() when ctx ends and ErrNotEnabled when the
// broker is or becomes disabled.
func (b *Broker) Dequeue(ctx context.Context, types []string) (*structs.Evaluation, string, error) {
	if len(types) == 0 {
		return nil, "", ErrNoTypes
	}
	return b.dequeue(ctx, func() *entry { return b.dequeueLocked(types) })
}

// DequeueFunc is Dequeue over every eval type that admit accepts, the
// failed queue excepted. admit is asked again each time an eval becomes
// ready, so it may change its mind between wake-ups; it runs with the
// broker's lock held and must not call back into the broker.
func (b *Broker) DequeueFunc(ctx context.Context, admit func(evalType string) bool) (*structs.Evaluation, string, error) {
	return b.dequeue(ctx, func() *entry {
		var types []string
		for t, h := range b.ready {
			if t != FailedQueue && h.Len() > 0 && admit(t) {
				types = append(types, t)
			}
		}
		return b.dequeueLocked(types)
	})
}

func (b *Broker) dequeue(ctx context.Context, pick func() *entry) (*structs.Evaluation, string, error) {
	b.mu.Lock()
	if !b.enabled {
		b.mu.Unlock()
		return nil, "", ErrNotEnabled
	}
	epoch := b.epoch
	for {
		if err := ctx.Err(); err != nil {
			b.mu.Unlock()
			return nil, "", err
		}
		if !b.enabled || b.epoch != epoch {
			b.mu.Unlock()
			return nil, "", ErrNotEnabled
		}
		// While paused nothing is delivered; SetPaused(false) wakes the
		// waiters.
		if !b.paused {
			if e := pick(); e != nil {
				ev, token := e.eval, e.token
				b.mu.Unlock()
				return ev, token, nil
			}
		}
		wake := b.readyCh
		b.waiters++
		b.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-wake:
		}
		b.mu.Lock()
		b.waiters--
	}
}

func (b *Broker) dequeueLocked(types []string) *entry {
	var best *readyHeap
	for _, t := range types {
		h := b.ready[t]
		if h == nil || h.Len() == 0 {
			continue
		}
		if best == nil || readyBefore((*h)[0], (*best)[0]) {
			best = h
		}
	}
	if best == nil {
		return nil
	}
	e := heap.Pop(best).(*entry)
	e.state = stateUnacked
	b.trackLocked(e)
	e.deliveries++
	e.token = uuid.NewString()
	e.paused = false
	b.armLocked(e, b.clock.Now().Add(b.cfg.NackTimeout))
	return e
}

// outstandingLocked finds the unacked eval evalID delivered under token.
func (b *Broker) outstandingLocked(evalID, token string) (*entry, error) {
	if !b.enabled {
		return nil, ErrNotEnabled
	}
	e, ok := b.evals[evalID]
	if !ok || e.state != stateUnacked {
		return nil, ErrNotOutstanding
	}
	if e.token != token {
		return nil, ErrTokenMismatch
	}
	return e, nil
}

// Ack completes a delivery: the eval is forgotten, its job's pending eval (if
// any) becomes ready, and a copy enqueued while it was outstanding is
// enqueued now.
func (b *Broker) Ack(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return err
	}
	b.disarmLocked(e)
	b.forgetLocked(e)
	b.releaseJobLocked(e)
	if again, ok := b.requeue[token]; ok {
		delete(b.requeue, token)
		b.enqueueLocked(again)
	}
	return nil
}

// Nack hands a delivered eval back. It is redelivered after InitialNackDelay
// (first delivery) or SubsequentNackDelay (later ones), or goes to
// FailedQueue once it has been delivered DeliveryLimit times. It keeps its
// job's slot throughout, so no other eval of the job overtakes it.
func (b *Broker) Nack(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return err
	}
	b.nackLocked(e)
	return nil
}

// Requeue hands a delivered eval back without counting the delivery
// against DeliveryLimit: the worker could not even start on it (its
// scheduler plugin is restarting, or the worker's per-type limit was
// reached), which says nothing about the eval. It is ready again after
// delay. Like Nack, it keeps its job's slot.
func (b *Broker) Requeue(evalID, token string, delay time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return err
	}
	b.disarmLocked(e)
	delete(b.requeue, e.token)
	e.token = ""
	e.paused = false
	e.deliveries--
	if delay <= 0 {
		b.pushReadyLocked(e)
		return nil
	}
	e.state = stateWaiting
	b.trackLocked(e)
	b.armLocked(e, b.clock.Now().Add(delay))
	return nil
}

func (b *Broker) nackLocked(e *entry) {
	b.disarmLocked(e)
	delete(b.requeue, e.token)
	e.token = ""
	e.paused = false
	if e.deliveries >= b.cfg.DeliveryLimit {
		if e.queue != FailedQueue {
			b.logger.Warn("eval reached delivery limit; moving to failed queue",
				"eval_id", e.eval.ID, "job_id", e.eval.JobID, "deliveries", e.deliveries)
		}
		e.queue = FailedQueue
		b.pushReadyLocked(e)
		return
	}
	delay := b.cfg.SubsequentNackDelay
	if e.deliveries <= 1 {
		delay = b.cfg.InitialNackDelay
	}
	if delay <= 0 {
		b.pushReadyLocked(e)
		return
	}
	e.state = stateWaiting
	b.trackLocked(e)
	b.armLocked(e, b.clock.Now().Add(delay))
}

// OutstandingReset restarts the nack timer of a delivered eval: the worker
// is alive and still working. A paused timer stays paused.
func (b *Broker) OutstandingReset(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return err
	}
	if !e.paused {
		b.armLocked(e, b.clock.Now().Add(b.cfg.NackTimeout))
	}
	return nil
}

// PauseNackTimeout stops the nack timer while the eval's plan waits in the
// plan queue, whose latency is the leader's, not the worker's.
func (b *Broker) PauseNackTimeout(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return err
	}
	b.disarmLocked(e)
	e.paused = true
	return nil
}

// ResumeNackTimeout restarts a paused nack timer with the full NackTimeout.
func (b *Broker) ResumeNackTimeout(evalID, token string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, err := b.outstandingLocked(evalID, token)
	if err != nil {
		return err
	}
	e.paused = false
	b.armLocked(e, b.clock.Now().Add(b.cfg.NackTimeout))
	return nil
}

// Outstanding returns the token under which evalID is currently delivered.
func (b *Broker) Outstanding(evalID string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.evals[evalID]
	if !ok || e.state != stateUnacked {
		return "", false
	}
	return e.token, true
}

// Cancelable drains up to max (all when max <= 0) evals that were superseded
// by a better eval of the same job while waiting; the leader cancels them
// through Raft. The broker has already forgotten them.
func (b *Broker) Cancelable(max int) []*structs.Evaluation {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.cancelable)
	if max > 0 && max < n {
		n = max
	}
	if n == 0 {
		return nil
	}
	out := make([]*structs.Evaluation, n)
	copy(out, b.cancelable)
	rest := copy(b.cancelable, b.cancelable[n:])
	clear(b.cancelable[rest:])
	b.cancelable = b.cancelable[:rest]
	return out
}

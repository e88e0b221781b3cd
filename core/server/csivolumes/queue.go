package csivolumes

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Controller work is pulled. A server cannot call a client, so the leader
// queues each controller call (publish, unpublish, create, delete,
// validate) for a client that runs a healthy controller instance of the
// volume's plugin; that client long-polls CSIController.Poll, runs the
// call through its csi-bridge and reports the result with
// CSIController.Done. The caller on the leader waits for the result. Calls to one plugin are serialized. The
// queue is the leader's alone and in memory: a call in flight when the
// leader steps down fails with ErrNoLeader, and its caller (a client's
// claim, the volume watcher) retries against the new leader.

// Timeouts of a controller call.
const (
	// csiControllerPickup is how long a queued call may wait for its
	// client to poll before the next controller client is tried.
	csiControllerPickup = 15 * time.Second
	// csiControllerTimeout bounds a whole call, as Nomad's two minutes.
	csiControllerTimeout = 2 * time.Minute
	// csiControllerPollMax bounds one poll's wait.
	csiControllerPollMax = 5 * time.Minute
)

type controllerCall struct {
	op     *structs.CSIControllerOp
	node   string
	taken  chan struct{}                       // closed when polled
	result chan *structs.CSIControllerOpResult // capacity 1
}

// Queue is the leader's queue of controller calls (see above): callers
// on the leader queue calls for a node and wait; the node's client takes
// them with Poll and reports with CSIController.Done.
type Queue struct {
	seq atomic.Uint64
	// pickup is csiControllerPickup (nanoseconds); tests shorten it.
	pickup atomic.Int64

	// lingering counts the calls given up on while their client runs
	// them (see linger).
	lingering sync.WaitGroup

	mu       sync.Mutex
	enabled  bool
	pending  map[string][]*controllerCall // by node ID, oldest first
	inflight map[string]*controllerCall   // by op ID
	wake     map[string]chan struct{}     // by node ID; closed on new work
	plugins  map[string]chan struct{}     // per-plugin semaphores
}

// NewQueue returns a queue, off until SetEnabled.
func NewQueue() *Queue {
	q := &Queue{
		pending: map[string][]*controllerCall{}, inflight: map[string]*controllerCall{},
		wake: map[string]chan struct{}{}, plugins: map[string]chan struct{}{},
	}
	q.pickup.Store(int64(csiControllerPickup))
	return q
}

// SetPickup sets how long a queued call waits for its client to poll
// before the next controller client is tried (tests shorten it).
func (q *Queue) SetPickup(d time.Duration) { q.pickup.Store(int64(d)) }

// Pickup returns that time.
func (q *Queue) Pickup() time.Duration { return time.Duration(q.pickup.Load()) }

// SetEnabled turns the queue on at step-up and off at step-down, when
// every waiting caller gets ErrNoLeader.
func (q *Queue) SetEnabled(on bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enabled = on
	if on {
		return
	}
	fail := &structs.CSIControllerOpResult{ErrorKind: structs.KindName(structs.ErrNoLeader), Error: "leadership lost"}
	for _, calls := range q.pending {
		for _, c := range calls {
			c.deliver(fail)
		}
	}
	for _, c := range q.inflight {
		c.deliver(fail)
	}
	for _, ch := range q.wake {
		close(ch)
	}
	q.pending, q.inflight, q.wake = map[string][]*controllerCall{}, map[string]*controllerCall{}, map[string]chan struct{}{}
}

func (c *controllerCall) deliver(r *structs.CSIControllerOpResult) {
	select {
	case c.result <- r:
	default:
	}
}

// lockPlugin serializes the calls to one plugin.
func (q *Queue) lockPlugin(ctx context.Context, plugin string) (func(), error) {
	q.mu.Lock()
	sem := q.plugins[plugin]
	if sem == nil {
		sem = make(chan struct{}, 1)
		q.plugins[plugin] = sem
	}
	q.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, structs.NewError(structs.ErrUnavailable, "CSI controller of plugin %s is busy: %v", plugin, ctx.Err())
	}
}

// call queues op for node and waits for its result. It fails with
// ErrUnavailable when the node does not poll within the pickup time. When
// ctx ends after the client took the call, the call still runs there: it
// is returned as running, still awaited, for the caller to linger on.
func (q *Queue) call(ctx context.Context, node string, op *structs.CSIControllerOp) (*structs.CSIControllerOpResult, *controllerCall, error) {
	op = op.Copy()
	op.ID = strconv.FormatUint(q.seq.Add(1), 10)
	c := &controllerCall{op: op, node: node, taken: make(chan struct{}), result: make(chan *structs.CSIControllerOpResult, 1)}
	q.mu.Lock()
	if !q.enabled {
		q.mu.Unlock()
		return nil, nil, structs.NewError(structs.ErrNoLeader, "No cluster leader")
	}
	q.pending[node] = append(q.pending[node], c)
	q.inflight[op.ID] = c
	if ch := q.wake[node]; ch != nil {
		close(ch)
		delete(q.wake, node)
	}
	q.mu.Unlock()

	pickupAfter := q.Pickup()
	pickup := time.NewTimer(pickupAfter)
	defer pickup.Stop()
	for {
		select {
		case r := <-c.result:
			q.forget(c)
			if r.ErrorKind != "" || r.Error != "" {
				return r, nil, structs.FromKind(r.ErrorKind, r.Error)
			}
			return r, nil, nil
		case <-c.taken:
			c.taken = nil // polled: wait for the result alone
		case <-pickup.C:
			if c.taken != nil {
				q.forget(c)
				return nil, nil, structs.NewError(structs.ErrUnavailable, "CSI controller on node %s did not take the call within %s", node, pickupAfter)
			}
		case <-ctx.Done():
			err := structs.NewError(structs.ErrUnavailable, "CSI controller call %s on node %s: %v", op.Kind, node, ctx.Err())
			if c.taken == nil {
				return nil, c, err // running on the client
			}
			q.forget(c)
			return nil, nil, err
		}
	}
}

// linger waits, in the background, for the end of a call its caller gave
// up on while the client ran it, then runs unlock: the plugin's next call
// must not start, on this client or another, while the driver may still
// be in this one. It ends with the call's result (delivered by done, or
// at step-down), or after csiControllerTimeout, the client's own bound.
func (q *Queue) linger(c *controllerCall, unlock func()) {
	q.lingering.Add(1)
	go func() {
		defer q.lingering.Done()
		defer unlock()
		defer q.forget(c)
		t := time.NewTimer(csiControllerTimeout)
		defer t.Stop()
		select {
		case <-c.result:
		case <-t.C:
		}
	}()
}

func (q *Queue) forget(c *controllerCall) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.inflight, c.op.ID)
	calls := q.pending[c.node]
	if i := slices.Index(calls, c); i >= 0 {
		q.pending[c.node] = slices.Delete(calls, i, i+1)
	}
	if len(q.pending[c.node]) == 0 {
		delete(q.pending, c.node)
	}
}

// Poll returns the calls queued for node, waiting up to wait for one.
func (q *Queue) Poll(ctx context.Context, node string, wait time.Duration) ([]*structs.CSIControllerOp, error) {
	if wait <= 0 || wait > csiControllerPollMax {
		wait = csiControllerPollMax
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		q.mu.Lock()
		if !q.enabled {
			q.mu.Unlock()
			return nil, structs.NewError(structs.ErrNoLeader, "No cluster leader")
		}
		if calls := q.pending[node]; len(calls) > 0 {
			n := min(len(calls), structs.MaxCSIControllerOpsPerPoll)
			out := make([]*structs.CSIControllerOp, 0, n)
			for _, c := range calls[:n] {
				out = append(out, c.op.Copy())
				close(c.taken)
			}
			q.pending[node] = slices.Delete(calls, 0, n)
			if len(q.pending[node]) == 0 {
				delete(q.pending, node)
			}
			q.mu.Unlock()
			return out, nil
		}
		ch := q.wake[node]
		if ch == nil {
			ch = make(chan struct{})
			q.wake[node] = ch
		}
		q.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// done delivers results; a result for an op not addressed to node, or no
// longer awaited, is dropped.
func (q *Queue) done(node string, results []*structs.CSIControllerOpResult) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range results {
		if r == nil {
			continue
		}
		if c := q.inflight[r.ID]; c != nil && c.node == node {
			c.deliver(r)
		}
	}
}

// ControllerNodes returns the ready nodes running a healthy controller of
// plugin, in ID order (the order Nomad tries them in).
func (vs *Volumes) ControllerNodes(pluginID string) ([]string, error) {
	st := vs.state()
	p, err := st.CSIPluginByID(nil, pluginID)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, structs.NewError(structs.ErrNotFound, "CSI plugin %s not found", pluginID)
	}
	var out []string
	for id, info := range p.Controllers {
		if info == nil || !info.Healthy {
			continue
		}
		n, err := st.NodeByID(nil, id)
		if err != nil {
			return nil, err
		}
		if n != nil && n.Ready() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil, structs.NewError(structs.ErrUnavailable, "no healthy CSI controller of plugin %s on a ready node", pluginID)
	}
	return out, nil
}

// ControllerCall runs op on a controller client of op.PluginID, trying the
// next client when one is unreachable, and returns the result and the node
// that answered. Calls to one plugin are serialized.
func (vs *Volumes) ControllerCall(ctx context.Context, op *structs.CSIControllerOp) (*structs.CSIControllerOpResult, string, error) {
	ctx, cancel := context.WithTimeout(ctx, csiControllerTimeout)
	defer cancel()
	unlock, err := vs.queue.lockPlugin(ctx, op.PluginID)
	if err != nil {
		return nil, "", err
	}
	held := true
	defer func() {
		if held {
			unlock()
		}
	}()
	nodes, err := vs.ControllerNodes(op.PluginID)
	if err != nil {
		return nil, "", err
	}
	var lastErr error
	for _, node := range nodes {
		r, running, err := vs.queue.call(ctx, node, op)
		if running != nil {
			held = false
			vs.queue.linger(running, unlock)
			return nil, node, err
		}
		if err == nil {
			return r, node, nil
		}
		if !isUnreachable(err) || ctx.Err() != nil {
			return nil, node, err
		}
		lastErr = err
		vs.logger.Warn("csi controller unreachable; trying the next", "plugin", op.PluginID, "node_id", node, "op", op.Kind, "error", err)
	}
	return nil, "", lastErr
}

// isUnreachable: another controller client may succeed.
func isUnreachable(err error) bool { return errors.Is(err, structs.ErrUnavailable) }

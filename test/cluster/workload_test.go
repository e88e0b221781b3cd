package cluster

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

const (
	// dispatchEvery is the workload's pace: one dispatch per period.
	dispatchEvery = 200 * time.Millisecond
	// dispatchGiveUp bounds the retries of one dispatch; a dispatch that
	// is never acknowledged is not counted (nor required to exist).
	dispatchGiveUp = 30 * time.Second
	// dispatchHTTPTimeout bounds one attempt, so that a request caught
	// by a crash fails and is retried elsewhere instead of hanging.
	dispatchHTTPTimeout = 10 * time.Second
	// settleTimeout bounds the wait for every child to finish after the
	// workload stops.
	settleTimeout = 2 * time.Minute
)

// A parameterized sysbatch job is dispatched every 200ms, through the
// servers in turn, while the leader is killed and restarted and then a
// follower is killed and restarted. Afterwards the state says: every
// acknowledged dispatch exists, no dispatch was made twice, and each child
// ran exactly once on each of the two (always eligible) nodes: one
// complete allocation per node, none lost, none duplicated.
func TestWorkloadThroughFailures(t *testing.T) {
	c := newCluster(t, options{clients: 2})
	nodes := []string{c.nodeID(c.clients[0]), c.nodeID(c.clients[1])}
	sort.Strings(nodes)
	const parent = "work"
	register(c.leader(), fmt.Sprintf(dispatchJob, parent))

	d := startDispatcher(c, parent)
	t.Cleanup(func() { d.stop() }) // before the cluster's teardown
	// progress waits until n more dispatches are acknowledged, so that
	// each phase of the test has the workload running through it.
	progress := func(after string) {
		t.Helper()
		want := d.count() + 8
		harness.WaitFor(t, waitTimeout, "8 acknowledged dispatches after "+after, func() (bool, string) {
			return d.count() >= want, d.String()
		})
	}
	progress("the start")

	old := c.leader()
	old.crash()
	t.Logf("leader %s crashed; %s leads", old, c.leader())
	progress("the leader's crash")
	old.restart()
	c.waitFollowing(old)
	c.waitHas(old, d.ackedIDs())
	progress("the old leader's return")

	l := c.leader()
	f := c.followers(l)[0]
	f.crash()
	t.Logf("follower %s crashed; %s leads", f, c.leader())
	progress("the follower's crash")
	f.restart()
	c.waitFollowing(f)
	c.waitHas(f, d.ackedIDs())
	progress("the follower's return")

	d.stop()
	acked := d.ackedByToken()
	t.Logf("workload: %s", d)

	l = c.leader()
	var stubs []harness.JobStub
	l.MustGet("/v1/jobs?prefix="+parent+"/", &stubs)
	children := map[string]bool{}
	for _, s := range stubs {
		if s.ParentID == parent {
			children[s.ID] = true
		}
	}
	for token, id := range acked {
		if !children[id] {
			t.Errorf("acknowledged dispatch %s (child %s) is missing from the state", token, id)
		}
	}
	// Every attempt carried an idempotency token, so a retry of a
	// dispatch that had committed must have answered the same child.
	byToken := map[string][]string{}
	for id := range children {
		var j harness.Job
		l.MustGet("/v1/job/"+harness.Escape(id), &j)
		byToken[j.DispatchIdempotencyToken] = append(byToken[j.DispatchIdempotencyToken], id)
	}
	for token, ids := range byToken {
		if token == "" || len(ids) != 1 {
			t.Errorf("dispatch token %q has children %v; want exactly one", token, ids)
		}
	}
	if extra := len(children) - len(acked); extra != 0 {
		t.Logf("%d children were committed but never acknowledged (their dispatch gave up)", extra)
	}

	// Each child runs once on each node. Wait for the last ones to finish,
	// then judge every child.
	var last string
	var byJob map[string]map[string][]harness.Alloc
	_, settled := harness.Poll(settleTimeout, 250*time.Millisecond, func() (bool, string) {
		var err error
		if byJob, err = allAllocs(l); err != nil {
			last = err.Error()
			return false, last
		}
		for id := range children {
			if !onePerNode(byJob[id], nodes, "complete") {
				last = id + ": " + describeAllocs(byJob[id])
				return false, last
			}
		}
		return true, ""
	})
	if !settled {
		t.Logf("children not all settled within %s; last: %s", settleTimeout, last)
	}
	ids := make([]string, 0, len(children))
	for id := range children {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	bad := 0
	for _, id := range ids {
		if msg := judgeChild(id, byJob[id], nodes); msg != "" {
			bad++
			if bad <= 10 {
				t.Errorf("child %s: %s", id, msg)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... and %d more children are wrong", bad-10)
	}
	for job := range byJob {
		if strings.HasPrefix(job, parent+"/") && !children[job] {
			t.Errorf("allocations of %s, which is not a child in the job list", job)
		}
	}
	t.Logf("%d children checked, %d allocations each", len(ids), len(nodes))
	c.waitConverged()
}

// judgeChild says what is wrong with one child's allocations ("" if
// nothing): exactly one per node, complete, its name unique on the node.
func judgeChild(id string, byNode map[string][]harness.Alloc, nodes []string) string {
	var problems []string
	for _, n := range nodes {
		allocs := byNode[n]
		names := map[string]int{}
		for _, al := range allocs {
			names[al.Name]++
			if al.ClientStatus != "complete" {
				problems = append(problems, fmt.Sprintf("alloc %s on node %.8s is %s/%s", shortID(al.ID), n, al.DesiredStatus, al.ClientStatus))
			}
		}
		for name, k := range names {
			if k > 1 {
				problems = append(problems, fmt.Sprintf("alloc name %s appears %d times on node %.8s", name, k, n))
			}
		}
		if len(allocs) != 1 {
			problems = append(problems, fmt.Sprintf("%d allocations on node %.8s", len(allocs), n))
		}
	}
	if len(byNode) > len(nodes) {
		problems = append(problems, fmt.Sprintf("allocations on %d nodes; there are %d", len(byNode), len(nodes)))
	}
	if len(problems) == 0 {
		return ""
	}
	return strings.Join(problems, "; ") + " " + describeAllocs(byNode)
}

// allAllocs reads every allocation from the leader, by job and node.
func allAllocs(l *agent) (map[string]map[string][]harness.Alloc, error) {
	var allocs []harness.Alloc
	if status, err := l.DoRetry(http.MethodGet, "/v1/allocations", nil, &allocs); err != nil || status != http.StatusOK {
		return nil, fmt.Errorf("GET /v1/allocations on %s: %d %v", l, status, err)
	}
	out := map[string]map[string][]harness.Alloc{}
	for _, al := range allocs {
		if out[al.JobID] == nil {
			out[al.JobID] = map[string][]harness.Alloc{}
		}
		out[al.JobID][al.NodeID] = append(out[al.JobID][al.NodeID], al)
	}
	return out, nil
}

// waitHas waits until a's own state holds every job of ids (a restarted
// server catching up while the workload keeps adding jobs, so its list
// never settles to equal the leader's for long).
func (c *cluster) waitHas(a *agent, ids []string) {
	c.t.Helper()
	harness.WaitFor(c.t, waitTimeout, a.Name+" to hold every acknowledged child", func() (bool, string) {
		got, err := jobIndexes(a, true)
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, id := range ids {
			if _, ok := got[id]; !ok {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing %d: %v", len(missing), missing)
	})
}

// dispatcher is the workload: one goroutine dispatching the parent job
// through the servers in turn, retrying each dispatch (with the same
// idempotency token) on other servers until one acknowledges it.
type dispatcher struct {
	parent  string
	servers []*harness.API // by address: the agents behind them restart
	cancel  context.CancelFunc
	done    chan struct{}
	once    sync.Once

	mu       sync.Mutex
	acked    map[string]string // idempotency token → child job ID
	order    []string          // child IDs in acknowledgement order
	attempts int
	failures map[string]int // what failed attempts answered, counted
	gaveUp   int
}

func startDispatcher(c *cluster, parent string) *dispatcher {
	ctx, cancel := context.WithCancel(context.Background())
	d := &dispatcher{parent: parent, cancel: cancel, done: make(chan struct{}),
		acked: map[string]string{}, failures: map[string]int{}}
	for _, s := range c.servers {
		api := harness.NewAPI(c.t, s.Addr, droverBin, repoRoot)
		api.HTTP.Timeout = dispatchHTTPTimeout
		d.servers = append(d.servers, api)
	}
	go d.run(ctx)
	return d
}

func (d *dispatcher) run(ctx context.Context) {
	defer close(d.done)
	defer func() {
		for _, s := range d.servers {
			s.HTTP.CloseIdleConnections()
		}
	}()
	tick := time.NewTicker(dispatchEvery)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		d.dispatch(ctx, seq)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// dispatch makes one dispatch, retrying it (bounded) until acknowledged.
func (d *dispatcher) dispatch(ctx context.Context, seq int) {
	token := fmt.Sprintf("w-%05d", seq)
	path := "/v1/job/" + d.parent + "/dispatch?idempotency_token=" + token
	body := map[string]any{"Meta": map[string]string{"seq": strconv.Itoa(seq)}}
	giveUp := time.Now().Add(dispatchGiveUp)
	for attempt := 0; ; attempt++ {
		srv := d.servers[(seq+attempt)%len(d.servers)]
		var resp harness.DispatchResponse
		status, err := srv.Do(http.MethodPut, path, body, &resp)
		d.mu.Lock()
		d.attempts++
		if err == nil && status == http.StatusOK && resp.DispatchedJobID != "" {
			d.acked[token] = resp.DispatchedJobID
			d.order = append(d.order, resp.DispatchedJobID)
			d.mu.Unlock()
			return
		}
		why := fmt.Sprintf("status %d", status)
		if err != nil {
			why = "transport error"
		}
		d.failures[why]++
		d.mu.Unlock()
		if time.Now().After(giveUp) || ctx.Err() != nil {
			d.mu.Lock()
			d.gaveUp++
			d.mu.Unlock()
			return
		}
		// Back off a little before the next server; not a wait on any
		// condition, only pacing of the retries.
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the workload and waits for its goroutine. Safe to call twice.
func (d *dispatcher) stop() {
	d.once.Do(d.cancel)
	<-d.done
}

func (d *dispatcher) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.acked)
}

func (d *dispatcher) ackedIDs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.order...)
}

func (d *dispatcher) ackedByToken() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]string, len(d.acked))
	for k, v := range d.acked {
		out[k] = v
	}
	return out
}

func (d *dispatcher) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fmt.Sprintf("%d acknowledged in %d attempts, %d given up, failed attempts: %v", len(d.acked), d.attempts, d.gaveUp, d.failures)
}

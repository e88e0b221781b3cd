package cluster

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// The leader's machine dies. The other two servers elect a new leader,
// writes through either of them work, no job acknowledged before the crash
// is lost (and each still runs on both nodes), and the dead server,
// restarted from its data dir, rejoins as a follower and catches up.
func TestLeaderKill(t *testing.T) {
	c := newCluster(t, options{clients: 2})
	nodes := []string{c.nodeID(c.clients[0]), c.nodeID(c.clients[1])}
	old := c.leader()

	// Acknowledged writes, through every server in turn, the last ones
	// right before the crash so that some are still being evaluated.
	var acked []string
	for i := range 6 {
		id := fmt.Sprintf("before-%d", i)
		register(c.servers[i%3], fmt.Sprintf(trueJob, id))
		acked = append(acked, id)
	}

	start := time.Now()
	old.crash()
	l := c.leader()
	t.Logf("%s crashed; %s leads after %s", old, l, time.Since(start).Round(time.Millisecond))
	if l == old {
		t.Fatalf("the crashed server %s is still named leader", old)
	}

	for _, s := range c.runningServers() {
		id := "after-via-" + s.Name
		register(s, fmt.Sprintf(trueJob, id))
		acked = append(acked, id)
	}

	jobs, err := jobIndexes(l, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range acked {
		if _, ok := jobs[id]; !ok {
			t.Errorf("acknowledged job %s is missing on the new leader %s", id, l)
		}
	}
	for _, id := range acked {
		c.waitSysbatchDone(l, id, nodes)
	}

	old.restart()
	c.waitRejoined(old)
	if now := c.leader(); now != l {
		t.Errorf("leadership moved from %s to %s when %s rejoined", l, now, old)
	}
	got, err := jobIndexes(old, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range acked {
		if _, ok := got[id]; !ok {
			t.Errorf("job %s is missing on the rejoined server %s", id, old)
		}
	}
	c.waitConverged()
}

// Every server in turn is stopped gracefully and restarted. The cluster
// keeps a leader throughout (a short election when the leader itself
// goes), writes keep working, and every server comes back with the whole
// state.
func TestRollingRestart(t *testing.T) {
	c := newCluster(t, options{clients: 1})
	node := c.nodeID(c.clients[0])
	register(c.leader(), fmt.Sprintf(trueJob, "initial"))

	// Watch for leaderless time from the servers' own point of view.
	watch := newLeaderWatch(c)
	defer watch.stop()

	leaderStops := 0
	for _, s := range c.servers {
		wasLeader := c.leader() == s
		if wasLeader {
			leaderStops++
		}
		s.stop()
		l := c.leader()
		id := "while-" + s.Name + "-down"
		register(l, fmt.Sprintf(trueJob, id))
		c.waitSysbatchDone(l, id, []string{node})
		s.restart()
		c.waitRejoined(s)
		t.Logf("%s (leader: %v) restarted; %s leads", s, wasLeader, c.leader())
	}

	gaps := watch.stop()
	const maxGap = 10 * time.Second
	for _, g := range gaps {
		if g > maxGap {
			t.Errorf("the cluster had no leader for %s (gaps: %v); want at most %s", g, gaps, maxGap)
		}
	}
	// Only the leader's own stop may leave the cluster without a leader,
	// for one election.
	if len(gaps) > leaderStops {
		t.Errorf("the cluster lost its leader %d times (gaps: %v) in %d stops of the leader", len(gaps), gaps, leaderStops)
	}
	t.Logf("leaderless gaps seen: %v (the leader was stopped %d times)", gaps, leaderStops)

	c.waitConverged()
	want := []string{"initial", "while-s1-down", "while-s2-down", "while-s3-down"}
	for _, s := range c.servers {
		got, err := jobIndexes(s, true)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for id := range got {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("%s's jobs after the rolling restart: %v; want %v", s, ids, want)
		}
	}
}

// leaderWatch measures the time during which no running server names a
// leader that runs, by polling /v1/status/leader. It is a measurement for
// the test, not a synchronisation.
type leaderWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	gaps []time.Duration
}

func newLeaderWatch(c *cluster) *leaderWatch {
	w := &leaderWatch{done: make(chan struct{})}
	// The cluster's agents change as the test restarts them; the watch
	// reads only their addresses, which never change.
	type srv struct {
		api  *harness.API
		addr string
	}
	var servers []srv
	for _, s := range c.servers {
		servers = append(servers, srv{harness.NewAPI(c.t, s.Addr, droverBin, repoRoot), s.RPCAddr()})
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			for _, s := range servers {
				s.api.HTTP.CloseIdleConnections()
			}
		}()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var since time.Time // start of the current gap
		for {
			up := map[string]bool{}
			named := map[string]bool{}
			for _, s := range servers {
				var leader string
				if status, err := s.api.Do(http.MethodGet, "/v1/status/leader", nil, &leader); err == nil && status == http.StatusOK {
					up[s.addr] = true
					if leader != "" {
						named[leader] = true
					}
				}
			}
			ok := false
			for l := range named {
				ok = ok || up[l]
			}
			switch {
			case !ok && since.IsZero():
				since = time.Now()
			case ok && !since.IsZero():
				w.gaps = append(w.gaps, time.Since(since).Round(time.Millisecond))
				since = time.Time{}
			}
			select {
			case <-w.done:
				if !since.IsZero() {
					w.gaps = append(w.gaps, time.Since(since).Round(time.Millisecond))
				}
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// stop ends the watch and returns the gaps it saw.
func (w *leaderWatch) stop() []time.Duration {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
	return w.gaps
}

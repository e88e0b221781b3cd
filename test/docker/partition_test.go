package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// The leader is cut off the network. The two other servers elect a new
// leader among themselves and accept a write, which both clients run (the
// clients that talked to the old leader fail over to reachable servers).
// The old leader, still up and reachable from the host, steps down and
// accepts no write. Once the network heals it rejoins as a follower and
// catches up on what it missed.
func TestPartitionedLeader(t *testing.T) {
	c := newCluster(t, "part")
	old, oldAddr := c.leader(c.servers)
	if old != c.clientsFirst {
		t.Logf("leadership moved from %s to %s since the clients started: they need not fail over", c.clientsFirst, old)
	}
	c.register(old, "before-partition")
	c.waitComplete(old, "before-partition")

	start := time.Now()
	c.isolate(old)
	t.Logf("isolated leader %s (was %s); its API is now at %s", old, oldAddr, old.Addr)

	// The majority elects a new leader of its own.
	majority := without(c.servers, old)
	leader, addr := c.leader(majority)
	if addr == oldAddr {
		t.Fatalf("majority names the isolated %s's address %s as leader's", old, addr)
	}
	t.Logf("new leader %s at %s, %s after the partition", leader, addr, time.Since(start).Round(time.Millisecond))

	// A write through the majority server that does not lead is forwarded,
	// committed, and run by both clients.
	via := without(majority, leader)[0]
	c.register(via, "during-partition")
	c.waitComplete(via, "during-partition")
	t.Logf("job registered and complete on both clients %s after the partition", time.Since(start).Round(time.Millisecond))

	// The old leader steps down: it no longer names itself, and a write
	// on it fails rather than being acknowledged by a minority.
	c.waitFor(old.Name+" to stop naming itself leader", electionTimeout, func() (bool, string) {
		l, err := old.leaderAddr()
		switch {
		case errors.Is(err, errNoLeader):
			return true, ""
		case err != nil:
			return false, err.Error()
		}
		return l != oldAddr, "leader " + l
	})
	status, body, err := old.Raw(http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": sysbatchJob("minority-write"), "Canonicalize": true})
	if err != nil || status != http.StatusOK {
		t.Fatalf("parse on %s: status %d, %v: %s", old, status, err, body)
	}
	status, body, err = old.Raw(http.MethodPut, "/v1/jobs", map[string]json.RawMessage{"Job": body})
	if err == nil && status/100 == 2 {
		t.Errorf("a write on the isolated %s was accepted: status %d: %s", old, status, body)
	} else {
		t.Logf("write on the isolated %s refused: status %d, %v: %s", old, status, err, body)
	}
	oldJobs, err := jobList(old)
	if err != nil {
		t.Fatal(err)
	}
	if ids := jobIDs(oldJobs); slices.Contains(ids, "during-partition") || slices.Contains(ids, "minority-write") {
		t.Errorf("the isolated %s lists jobs it cannot have: %v", old, ids)
	}

	// Heal: the old leader rejoins as a follower and catches up.
	c.heal(old)
	healed := time.Now()
	c.waitFor(old.Name+" to rejoin as a follower and catch up", waitTimeout, func() (bool, string) {
		l, _, err := c.pollLeader(c.servers, 0)
		if err != nil {
			return false, err.Error()
		}
		if l == old {
			return false, old.Name + " leads again"
		}
		want, err := jobList(l)
		if err != nil {
			return false, err.Error()
		}
		got, err := jobList(old)
		if err != nil {
			return false, err.Error()
		}
		return reflect.DeepEqual(got, want), fmt.Sprintf("%s lists %+v, leader %s lists %+v", old, got, l, want)
	})
	t.Logf("%s caught up %s after the heal", old, time.Since(healed).Round(time.Millisecond))
	rc, err := old.raftConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rc.Servers {
		if p.ID == old.Name && (!p.Voter || p.Leader) {
			t.Errorf("%s after the heal: %+v; want a voter that does not lead", old, p)
		}
	}
	if len(rc.Servers) != len(c.servers) {
		t.Errorf("%s after the heal: raft configuration %+v; want the %d servers", old, rc.Servers, len(c.servers))
	}
}

func jobIDs(jobs []harness.JobStub) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

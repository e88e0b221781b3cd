package cluster

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/test/internal/harness"
)

// aclStanza switches ACLs on in an agent's config.
const aclStanza = "acl {\n  enabled = true\n}\n\n"

// A running cluster without ACLs is upgraded to ACLs by restarting its
// servers one at a time with `acl { enabled = true }`, then bootstrapped.
// The client and its task run on untouched. From then on an anonymous
// caller is refused by every server and by the client agent (which proxies
// to the servers), the management token is served, and a one-time token
// issued by the leader survives the leader's crash: a survivor exchanges it
// once, and a second exchange is refused.
func TestACLUpgradeAndOneTimeTokenFailover(t *testing.T) {
	c := newCluster(t, options{clients: 1})
	before := c.runSleeper("acl-sleeper")

	join := make([]string, len(c.servers))
	for i, s := range c.servers {
		join[i] = s.RPCAddr()
	}
	c.opts.agentExtra += aclStanza
	for _, s := range c.servers {
		s.stop()
		if err := s.writeConfig(join, c.opts); err != nil {
			t.Fatal(err)
		}
		s.restart()
		// The operator endpoints now want a token no one has yet: wait on
		// the public status endpoints.
		c.waitPublicQuorum()
		t.Logf("%s restarted with ACLs on", s)
	}

	var boot struct{ AccessorID, SecretID, Type string }
	c.leader().MustWrite(http.MethodPost, "/v1/acl/bootstrap", nil, &boot)
	if boot.Type != "management" || boot.SecretID == "" {
		t.Fatalf("bootstrap answered %+v", boot)
	}

	for _, a := range c.all() {
		if status, body, err := a.RawRetry(http.MethodGet, "/v1/jobs", nil); err != nil || status != http.StatusForbidden {
			t.Errorf("anonymous GET /v1/jobs on %s: %d %v %s; want 403", a, status, err, body)
		}
		a.Token = boot.SecretID
		var jobs []struct{ ID string }
		a.MustGet("/v1/jobs", &jobs)
		if len(jobs) != 1 || jobs[0].ID != "acl-sleeper" {
			t.Errorf("GET /v1/jobs with the management token on %s: %+v", a, jobs)
		}
	}

	// The task ran through the upgrade: the same allocation, still running.
	after, err := allocsByNode(c.leader(), "acl-sleeper")
	if err != nil {
		t.Fatal(err)
	}
	for node, was := range before {
		now := after[node]
		if len(now) != 1 || now[0].ID != was.ID || now[0].ClientStatus != "running" {
			t.Errorf("node %s: allocations %+v after the upgrade; want %s still running", node, now, was.ID)
		}
	}

	// A one-time token outlives the leader that issued it.
	old := c.leader()
	var ott struct {
		OneTimeToken struct{ OneTimeSecretID, AccessorID string }
	}
	old.MustWrite(http.MethodPost, "/v1/acl/token/onetime", nil, &ott)
	if ott.OneTimeToken.AccessorID != boot.AccessorID || ott.OneTimeToken.OneTimeSecretID == "" {
		t.Fatalf("one-time token %+v; want one for accessor %s", ott.OneTimeToken, boot.AccessorID)
	}
	old.crash()
	l := c.leader()
	t.Logf("%s crashed; %s leads", old, l)
	var survivors []*agent
	for _, s := range c.runningServers() {
		s.Token = "" // the exchange needs no token
		survivors = append(survivors, s)
	}
	body := map[string]string{"OneTimeSecretID": ott.OneTimeToken.OneTimeSecretID}

	// Both survivors try at once: at most one gets the token, and exactly
	// one unless an attempt's outcome was unknown: a 503 can come from a
	// leader that lost its lead while committing the exchange, which may
	// still have been applied, so the retry then finds the token spent.
	var (
		mu        sync.Mutex
		wins      []string
		statuses  []int
		ambiguous int
		wg        sync.WaitGroup
	)
	for _, s := range survivors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, b, unknown, err := exchangeTracked(s, body)
			mu.Lock()
			defer mu.Unlock()
			statuses = append(statuses, status)
			ambiguous += unknown
			if err == nil && status == http.StatusOK {
				wins = append(wins, string(b))
			}
		}()
	}
	wg.Wait()
	switch {
	case len(wins) > 1:
		t.Fatalf("exchanges after failover: statuses %v; the one-time token was exchanged twice", statuses)
	case len(wins) == 0 && ambiguous == 0:
		t.Fatalf("exchanges after failover: statuses %v; want exactly one 200", statuses)
	case len(wins) == 0:
		t.Logf("exchanges after failover: statuses %v after %d attempts of unknown outcome (503)", statuses, ambiguous)
	case !strings.Contains(wins[0], boot.AccessorID) || !strings.Contains(wins[0], boot.SecretID):
		t.Errorf("the exchange answered %s; want the management token %s", wins[0], boot.AccessorID)
	}
	if status, b, err := exchangeRetry(l, body); err != nil || status != http.StatusForbidden {
		t.Errorf("a third exchange on %s: %d %v %s; want 403", l, status, err, b)
	}

	for _, s := range c.servers {
		s.Token = boot.SecretID
	}
	old.restart()
	c.waitPublicQuorum()
	c.waitCaughtUp(old)
}

// exchangeRetry exchanges a one-time token, again while the agent cannot
// serve yet (no leader for a moment after the crash). A 403 is final.
func exchangeRetry(a *agent, body any) (int, []byte, error) {
	return a.RawRetry(http.MethodPost, "/v1/acl/token/onetime/exchange", body)
}

// exchangeTracked is exchangeRetry that counts the attempts answered 503:
// a write whose leader lost its lead while committing it answers 503 and
// may still have been applied.
func exchangeTracked(a *agent, body any) (status int, b []byte, unknown int, err error) {
	deadline := time.Now().Add(harness.RetryTimeout)
	for {
		status, b, err = a.Raw(http.MethodPost, "/v1/acl/token/onetime/exchange", body)
		if !harness.Retryable(http.MethodPost, status, err) || time.Now().After(deadline) {
			return status, b, unknown, err
		}
		if err == nil && status == http.StatusServiceUnavailable {
			unknown++
		}
		time.Sleep(100 * time.Millisecond) // back-off between retries, not synchronisation
	}
}

// waitPublicQuorum waits, through the endpoints that need no token, until
// every running server names the same leader and three peers.
func (c *cluster) waitPublicQuorum() {
	c.t.Helper()
	harness.WaitFor(c.t, formTimeout, "every server to name one leader and three peers", func() (bool, string) {
		leaders := map[string]bool{}
		for _, s := range c.runningServers() {
			var leader string
			if status, err := s.Do(http.MethodGet, "/v1/status/leader", nil, &leader); err != nil || status != http.StatusOK || leader == "" {
				return false, fmt.Sprintf("%s: leader %q, %d %v", s, leader, status, err)
			}
			leaders[leader] = true
			var peers []string
			if status, err := s.Do(http.MethodGet, "/v1/status/peers", nil, &peers); err != nil || status != http.StatusOK || len(peers) != 3 {
				return false, fmt.Sprintf("%s: peers %v, %d %v", s, peers, status, err)
			}
		}
		return len(leaders) == 1, fmt.Sprintf("leaders %v", leaders)
	})
}

package ui

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/state"
)

func TestServersPage(t *testing.T) {
	three := []Peer{
		{ID: "id-a", Node: "server-a", Address: "10.0.0.1:4647", Leader: true, Voter: true},
		{ID: "id-b", Node: "server-b", Address: "10.0.0.2:4647", Voter: true},
		{ID: "id-c", Node: "server-c", Address: "10.0.0.3:4647"},
	}
	cases := []struct {
		name   string
		peers  func() ([]Peer, error)
		leader string
		token  string
		status int
		want   []string
	}{
		{"three peers", func() ([]Peer, error) { return three, nil }, "10.0.0.1:4647", "operator", 200, []string{
			"<th scope=\"row\">server-a</th><td><code>id-a</code></td><td>10.0.0.1:4647</td><td><strong>leader</strong></td><td>yes</td>",
			"<th scope=\"row\">server-b</th><td><code>id-b</code></td><td>10.0.0.2:4647</td><td>follower</td><td>yes</td>",
			"<td>follower</td><td>no</td>", "Leader: <code>10.0.0.1:4647</code>"}},
		{"no leader", func() ([]Peer, error) { return three[1:], nil }, "", "operator", 200, []string{"The cluster has no leader."}},
		{"peers unreadable", func() ([]Peer, error) { return nil, errors.New("raft is shut down") }, "", "operator", 500, []string{"raft is shut down"}},
		{"leader alone without a Raft view", nil, "10.0.0.9:4647", "operator", 200, []string{"<td>10.0.0.9:4647</td><td><strong>leader</strong></td>"}},
		{"without operator:read", func() ([]Peer, error) { return three, nil }, "10.0.0.1:4647", "reader", 403, []string{"Your token may not read the Raft configuration (operator:read)."}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, err := state.NewStateStore()
			if err != nil {
				t.Fatal(err)
			}
			u := New(Config{State: func() *state.StateStore { return st }, Peers: c.peers,
				LeaderAddr: func() string { return c.leader },
				Resolver: fakeResolver{
					"operator": compile(t, `operator { policy = "read" }`),
					"reader":   compile(t, `namespace "default" { policy = "read" }`),
				}})
			req := httptest.NewRequest("GET", "/ui/servers", nil)
			req.AddCookie(newCookie(c.token))
			rec := httptest.NewRecorder()
			u.ServeHTTP(rec, req)
			if rec.Code != c.status {
				t.Fatalf("%d, want %d\n%s", rec.Code, c.status, rec.Body.String())
			}
			for _, w := range c.want {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("page lacks %q\n%s", w, rec.Body.String())
				}
			}
		})
	}
}

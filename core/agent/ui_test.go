package agent

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// TestAgentServesUI: a dev agent serves the web UI at /ui/, with the Raft
// configuration of its own server on the servers page.
func TestAgentServesUI(t *testing.T) {
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.RPC = freePort(t)
	cfg.Client.Enabled = false
	a := startTestAgent(t, cfg, hclog.Warn)
	if err := waitForCond(func() bool { return a.Server().LeaderAddr() != "" }); err != nil {
		t.Fatal("no leader:", err)
	}
	cases := []struct {
		path   string
		status int
		want   []string
	}{
		{"/ui/jobs", http.StatusOK, []string{"<h1>Jobs</h1>", "No jobs are registered."}},
		{"/ui/servers", http.StatusOK, []string{"Leader: <code>" + a.Server().LeaderAddr() + "</code>", "<strong>leader</strong>"}},
		{"/ui/nodes", http.StatusOK, []string{"No nodes have registered."}},
		{"/ui/jobs/default/nope", http.StatusNotFound, []string{"No job nope in namespace default."}},
	}
	for _, c := range cases {
		code, body := httpDo(t, a, http.MethodGet, c.path)
		if code != c.status {
			t.Errorf("GET %s: %d, want %d\n%s", c.path, code, c.status, body)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q\n%s", c.path, w, body)
			}
		}
	}
}

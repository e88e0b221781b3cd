package operator

import (
	"net/http"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

func TestAgentInfo(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.Handle("GET /v1/agent/self", rawJSON(`{"config":{},"member":{},"stats":{
		"raft":{"state":"Leader","term":"2"},"nomad":{"leader":"true","server":"true"},"runtime":{"arch":"amd64"}}}`))
	r := f.Run(t, "", "agent-info")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "nomad\n  leader = true\n  server = true\nraft\n  state = Leader\n  term = 2\nruntime\n  arch = amd64\n")

	r = f.Run(t, "", "agent-info", "-json")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, `"state": "Leader"`)

	denied := clitest.NewFakeAgent(t)
	denied.Fail("GET /v1/agent/self", 403, "Permission denied")
	r = denied.Run(t, "", "agent-info")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Error querying agent info: Unexpected response code: 403 (Permission denied)")
}

// drover monitor asks for plain lines at the level given and prints what
// the agent streams until the stream ends; a bad level is the agent's 400.
func TestMonitor(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.Handle("GET /v1/agent/monitor", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("2026-12-07T00:00:00Z [DEBUG] agent: one\n"))
	})
	r := f.Run(t, "", "monitor", "-log-level", "DEBUG", "-json")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "[DEBUG] agent: one\n")
	if q := f.Request("GET /v1/agent/monitor").Query; q != "log_json=true&log_level=debug&plain=true" {
		t.Errorf("monitor query %q", q)
	}

	bad := clitest.NewFakeAgent(t)
	bad.Fail("GET /v1/agent/monitor", 400, `log_level: unknown log level "loud"`)
	r = bad.Run(t, "", "monitor", "-log-level", "loud")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, `Error starting monitor: Unexpected response code: 400 (log_level: unknown log level "loud")`)
}

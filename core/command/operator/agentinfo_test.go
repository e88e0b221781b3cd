package operator

import (
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

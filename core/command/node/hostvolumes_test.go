package node

import (
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

// `node status` shows the node's host volumes as Nomad's does: their names
// in the summary, and with -verbose a table of name, read-only and path.
func TestNodeStatusHostVolumes(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	node := clitest.TestNode()
	node.HostVolumes = map[string]*structs.ClientHostVolumeConfig{
		"shared": {Name: "shared", Path: "/srv/shared"}, "certs": {Name: "certs", Path: "/etc/certs", ReadOnly: true},
	}
	f.JSON("GET /v1/nodes", []*structs.NodeListStub{node.Stub()})
	f.JSON("GET /v1/node/"+clitest.NodeID, node)
	f.JSON("GET /v1/node/"+clitest.NodeID+"/allocations", []*structs.Allocation{})
	r := f.Run(t, "", "node", "status", "f747")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "node", r.Out, "Host Volumes  = certs,shared")
	r = f.Run(t, "", "node", "status", "-verbose", "f747")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "verbose", r.Out, "Host Volumes\nName    ReadOnly  Source\ncerts   true      /etc/certs\nshared  false     /srv/shared")
}

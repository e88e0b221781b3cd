package node

import (
	"encoding/json"
	"testing"

	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestNodeMeta(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/agent/self", map[string]any{"stats": map[string]any{"client": map[string]any{"node_id": clitest.NodeID}}})
	f.JSON("GET /v1/nodes", []*structs.NodeListStub{{ID: clitest.NodeID}})
	blue := "blue"
	f.JSON("GET /v1/client/metadata", clientapi.NodeMetaResponse{
		Meta: map[string]string{"color": "blue"}, Dynamic: map[string]*string{"color": &blue, "rack": nil}, Static: map[string]string{"rack": "r1"},
	})
	f.JSON("POST /v1/client/metadata", clientapi.NodeMetaResponse{})

	r := f.Run(t, "", "node", "meta", "read")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out, "All Meta", "color = blue", "Dynamic Meta", "rack  = <unset>", "Static Meta", "rack = r1")
	if q := f.Request("GET /v1/client/metadata").Query; q != "node_id="+clitest.NodeID {
		t.Errorf("read query %q", q)
	}

	r = f.Run(t, "", "node", "meta", "apply", "-node-id", "f747", "-unset", "rack", "color=blue", "size=")
	clitest.WantCode(t, r, 0)
	var req clientapi.NodeMetaApplyRequest
	if err := json.Unmarshal(f.Request("POST /v1/client/metadata").Body, &req); err != nil {
		t.Fatal(err)
	}
	if req.NodeID != clitest.NodeID || *req.Meta["color"] != "blue" || *req.Meta["size"] != "" || req.Meta["rack"] != nil || len(req.Meta) != 3 {
		t.Errorf("apply sent %+v", req)
	}
	for _, bad := range [][]string{{"novalue"}, {}, {"-unset", "a", "a=b"}} {
		r = f.Run(t, "", append([]string{"node", "meta", "apply"}, bad...)...)
		if r.Code == 0 {
			t.Errorf("apply %v succeeded", bad)
		}
	}
}

package node

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestNodeStatus(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	node := clitest.TestNode()
	f.JSON("GET /v1/nodes", []*structs.NodeListStub{node.Stub(), {ID: "00000000-1111", Name: "client-2", Datacenter: "dc2", NodePool: "gpu",
		NodeClass: "big", Drain: true, SchedulingEligibility: "ineligible", Status: "ready"}})
	f.JSON("GET /v1/node/"+clitest.NodeID, node)
	a := clitest.TestAlloc("t")
	f.JSON("GET /v1/node/"+clitest.NodeID+"/allocations", []*structs.Allocation{a})
	f.JSON("GET /v1/agent/self", map[string]any{"stats": map[string]any{"client": map[string]any{"node_id": clitest.NodeID}}})

	r := f.Run(t, "", "node", "status")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "list", r.Out,
		"ID        Node Pool  DC   Name      Class   Drain  Eligibility  Status\n"+
			"f7476465  default    dc1  client-1  <none>  false  eligible     ready\n"+
			"00000000  gpu        dc2  client-2  big     true   ineligible   ready")

	f.JSON("GET /v1/nodes", []*structs.NodeListStub{node.Stub()})
	for _, args := range [][]string{{"node", "status", "f747"}, {"node", "status", "-self"}} {
		r = f.Run(t, "", args...)
		clitest.WantCode(t, r, 0)
		clitest.WantContains(t, "node", r.Out,
			"ID            = f7476465",
			"Drain         = false",
			"Driver Status = raw_exec",
			"Node Events\nTime",
			"Cluster    Node registered",
			"Allocated Resources\nCPU           Memory           Disk\n500/4000 MHz  256 MiB/8.0 GiB  300 MiB/40 GiB",
			"Allocations\nID        Node ID   Task Group  Version  Desired  Status   Created  Modified\n8ba85cef  171a583b  g           3        run      running  5m ago   1m ago",
		)
	}

	r = f.Run(t, "", "node", "status", "-json", "f747")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "json", r.Out, `"Name": "client-1"`)

	f.JSON("GET /v1/agent/self", map[string]any{"stats": map[string]any{}})
	r = f.Run(t, "", "node", "status", "-self")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "agent is not running a client")
}

func TestNodeEligibility(t *testing.T) {
	tests := []struct {
		args    []string
		code    int
		want    string
		wantErr string
		body    string
	}{
		{args: []string{"-disable", "f747"}, want: `Node "` + clitest.NodeID + `" scheduling eligibility set: ineligible for scheduling`, body: `{"Eligibility":"ineligible"}`},
		{args: []string{"-enable", "f747"}, want: "eligible for scheduling", body: `{"Eligibility":"eligible"}`},
		{args: []string{"f747"}, code: 1, wantErr: "Either the '-enable' or '-disable' flag must be set"},
		{args: []string{"-enable", "-disable", "f747"}, code: 1, wantErr: "Either the '-enable' or '-disable' flag must be set"},
		{args: []string{"-enable"}, code: 1, wantErr: "This command takes one argument"},
	}
	for _, tc := range tests {
		f := clitest.NewFakeAgent(t)
		f.JSON("GET /v1/nodes", []*structs.NodeListStub{clitest.TestNode().Stub()})
		f.JSON("POST /v1/node/"+clitest.NodeID+"/eligibility", structs.NodeEligibilityUpdateResponse{Index: 9})
		r := f.Run(t, "", append([]string{"node", "eligibility"}, tc.args...)...)
		clitest.WantCode(t, r, tc.code)
		clitest.WantContains(t, "stdout", r.Out, tc.want)
		clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
		if tc.body != "" {
			if got := string(f.Request("POST /v1/node/" + clitest.NodeID + "/eligibility").Body); got != tc.body {
				t.Errorf("%v: body %s, want %s", tc.args, got, tc.body)
			}
		}
	}
}

func TestNodeDrainRequests(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		wantErr  string
		wantOut  string
		wantSpec *structs.DrainSpec
		wantElig bool
	}{
		{name: "enable default deadline", args: []string{"-enable", "-detach", "-yes", "f747"}, wantOut: "drain strategy set",
			wantSpec: &structs.DrainSpec{Deadline: time.Hour}},
		{name: "enable custom", args: []string{"-enable", "-detach", "-deadline", "10m", "-ignore-system", "-yes", "f747"},
			wantSpec: &structs.DrainSpec{Deadline: 10 * time.Minute, IgnoreSystemJobs: true}},
		{name: "force", args: []string{"-enable", "-detach", "-force", "-yes", "f747"}, wantSpec: &structs.DrainSpec{Deadline: -1}},
		{name: "no deadline", args: []string{"-enable", "-detach", "-no-deadline", "-yes", "f747"}, wantSpec: &structs.DrainSpec{Deadline: 0}},
		{name: "disable", args: []string{"-disable", "-yes", "f747"}, wantOut: "drain strategy unset", wantElig: true},
		{name: "disable keep ineligible", args: []string{"-disable", "-keep-ineligible", "-yes", "f747"}},
		{name: "neither", args: []string{"f747"}, code: 1, wantErr: "Either the '-enable' or '-disable' flag must be set"},
		{name: "deadline with disable", args: []string{"-disable", "-deadline", "1m", "f747"}, code: 1, wantErr: "only valid with -enable"},
		{name: "force and deadline", args: []string{"-enable", "-force", "-deadline", "1m", "f747"}, code: 1, wantErr: "Only one of"},
		{name: "bad deadline", args: []string{"-enable", "-deadline", "soon", "f747"}, code: 1, wantErr: "invalid value"},
		{name: "prefix refused", args: []string{"-enable", "f747"}, code: 0, wantOut: "Canceling drain toggle"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.JSON("GET /v1/nodes", []*structs.NodeListStub{clitest.TestNode().Stub()})
			f.JSON("POST /v1/node/"+clitest.NodeID+"/drain", structs.NodeEligibilityUpdateResponse{Index: 9})
			r := f.Run(t, "n\n", append([]string{"node", "drain"}, tc.args...)...)
			clitest.WantCode(t, r, tc.code)
			clitest.WantContains(t, "stderr", r.ErrOut, tc.wantErr)
			clitest.WantContains(t, "stdout", r.Out, tc.wantOut)
			if tc.code != 0 || tc.wantOut == "Canceling drain toggle" {
				return
			}
			var body struct {
				DrainSpec    *structs.DrainSpec
				MarkEligible bool
			}
			if err := json.Unmarshal(f.Request("POST /v1/node/"+clitest.NodeID+"/drain").Body, &body); err != nil {
				t.Fatal(err)
			}
			if (body.DrainSpec == nil) != (tc.wantSpec == nil) || (body.DrainSpec != nil && *body.DrainSpec != *tc.wantSpec) || body.MarkEligible != tc.wantElig {
				t.Errorf("body %+v %+v, want %+v eligible %t", body, body.DrainSpec, tc.wantSpec, tc.wantElig)
			}
		})
	}
}

func TestNodeDrainMonitor(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/nodes", []*structs.NodeListStub{clitest.TestNode().Stub()})
	f.JSON("POST /v1/node/"+clitest.NodeID+"/drain", structs.NodeEligibilityUpdateResponse{Index: 9})

	// The drain progresses one step per look at the node's allocations:
	// marked for migration, then stopped; then the node's drain ends.
	migrate := true
	var step atomic.Int32
	f.Handle("GET /v1/node/"+clitest.NodeID+"/allocations", func(w http.ResponseWriter, r *http.Request) {
		a := clitest.TestAlloc("t")
		switch step.Add(1) {
		case 1:
		case 2:
			a.DesiredTransition.Migrate = &migrate
		default:
			a.DesiredTransition.Migrate = &migrate
			a.ClientStatus = "complete"
		}
		_ = json.NewEncoder(w).Encode([]*structs.Allocation{a})
	})
	f.Handle("GET /v1/node/"+clitest.NodeID, func(w http.ResponseWriter, r *http.Request) {
		n := clitest.TestNode()
		if step.Load() < 3 {
			n.DrainStrategy = &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Hour}}
		}
		_ = json.NewEncoder(w).Encode(n)
	})
	r := f.Run(t, "", "node", "drain", "-enable", "-yes", clitest.NodeID)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "stdout", r.Out,
		`Node "`+clitest.NodeID+`" drain strategy set`,
		`==> Monitoring node "`+clitest.NodeID+`"`,
		`    Alloc "8ba85cef" marked for migration`,
		`    Alloc "8ba85cef" status running -> complete`,
		`    All allocations on node "`+clitest.NodeID+`" have stopped`,
		`==> Drain complete for node "`+clitest.NodeID+`"`,
	)
}

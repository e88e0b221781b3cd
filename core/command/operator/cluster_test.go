package operator

import (
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/clitest"
)

// membersBody is a canned /v1/agent/members answer from drover: servers
// tag the leader.
const membersBody = `{"ServerName":"s1","ServerRegion":"global","ServerDC":"dc1","Members":[
 {"Name":"s2","Addr":"10.0.0.2","Port":4647,"Status":"failed","Tags":{"role":"drover","region":"global","dc":"dc1","build":"0.3.0","port":"4647","raft_vsn":"3","leader":"false"}},
 {"Name":"s1","Addr":"10.0.0.1","Port":4647,"Status":"alive","Tags":{"role":"drover","region":"global","dc":"dc1","build":"0.3.0","port":"4647","raft_vsn":"3","leader":"true"}},
 {"Name":"s3","Addr":"10.0.0.3","Port":4647,"Status":"alive","Tags":{"role":"drover","region":"global","dc":"dc2","port":"4647","leader":"false"}}]}`

// nomadMembersBody has no leader tags, as Nomad answers: the CLI matches
// addresses against /v1/status/leader instead.
const nomadMembersBody = `{"ServerName":"s1.global","Members":[
 {"Name":"s1.global","Addr":"10.0.0.1","Port":4648,"Status":"alive","Tags":{"region":"global","dc":"dc1","port":"4647","raft_vsn":"3","build":"1.6.5"}},
 {"Name":"s2.global","Addr":"10.0.0.2","Port":4648,"Status":"alive","Tags":{"region":"global","dc":"dc1","port":"4647","raft_vsn":"3","build":"1.6.5"}}]}`

func rawJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}
}

func TestServerMembers(t *testing.T) {
	tests := []struct {
		name     string
		members  string
		leader   func(f *clitest.FakeAgent) // sets up /v1/status/leader
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{
			name: "drover tags the leader", members: membersBody, wantCode: 0,
			wantOut: "Name  Address   Port  Status  Leader  Raft Version  Build  Datacenter  Region\n" +
				"s1    10.0.0.1  4647  alive   true    3             0.3.0  dc1         global\n" +
				"s2    10.0.0.2  4647  failed  false   3             0.3.0  dc1         global\n" +
				"s3    10.0.0.3  4647  alive   false   N/A           N/A    dc2         global\n",
		},
		{
			name: "nomad: leader by address", members: nomadMembersBody, wantCode: 0,
			leader: func(f *clitest.FakeAgent) { f.JSON("GET /v1/status/leader", "10.0.0.2:4647") },
			wantOut: "s1.global  10.0.0.1  4648  alive   false   3             1.6.5  dc1         global\n" +
				"s2.global  10.0.0.2  4648  alive   true",
		},
		{
			name: "nomad: no leader", members: nomadMembersBody, wantCode: 0,
			leader:  func(f *clitest.FakeAgent) { f.Fail("GET /v1/status/leader", 500, "No cluster leader") },
			wantOut: "s2.global  10.0.0.2  4648  alive   false",
		},
		{
			name: "nomad: leader lookup fails", members: nomadMembersBody, wantCode: 1,
			leader:  func(f *clitest.FakeAgent) { f.Fail("GET /v1/status/leader", 403, "Permission denied") },
			wantErr: "Error determining leaders: Unexpected response code: 403 (Permission denied)",
		},
		{
			name: "verbose shows tags", members: membersBody, args: []string{"-verbose"}, wantCode: 0,
			wantOut: "Name  Address   Port  Status  Tags\n" +
				"s1    10.0.0.1  4647  alive   build=0.3.0,dc=dc1,leader=true,port=4647,raft_vsn=3,region=global,role=drover\n",
		},
		{
			name: "json", members: membersBody, args: []string{"-json"}, wantCode: 0,
			wantOut: `"ServerName": "s1"`,
		},
		{
			name: "arguments refused", members: membersBody, args: []string{"extra"}, wantCode: 1,
			wantErr: "This command takes no arguments",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.Handle("GET /v1/agent/members", rawJSON(tt.members))
			if tt.leader != nil {
				tt.leader(f)
			}
			r := f.Run(t, "", append([]string{"server", "members"}, tt.args...)...)
			clitest.WantCode(t, r, tt.wantCode)
			clitest.WantContains(t, "stdout", r.Out, tt.wantOut)
			clitest.WantContains(t, "stderr", r.ErrOut, tt.wantErr)
			if tt.leader != nil {
				if q := f.Request("GET /v1/status/leader").Query; q != "region=global" {
					t.Errorf("leader query %q, want region=global", q)
				}
			}
		})
	}
}

func TestServerMembersError(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.Fail("GET /v1/agent/members", 501, "This agent's server does not run in a cluster")
	r := f.Run(t, "", "server", "members")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Error querying servers: Unexpected response code: 501 (This agent's server does not run in a cluster)")
}

const raftConfigBody = `{"Servers":[
 {"ID":"s1","Node":"s1","Address":"10.0.0.1:4647","Leader":true,"Voter":true,"RaftProtocol":"3"},
 {"ID":"s2","Node":"s2","Address":"10.0.0.2:4647","Leader":false,"Voter":false,"RaftProtocol":"3"}],"Index":12}`

func TestRaftListPeers(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantQuery string
		wantOut   string
	}{
		{
			name: "table",
			wantOut: "Node  ID  Address        State     Voter  RaftProtocol\n" +
				"s1    s1  10.0.0.1:4647  leader    true   3\n" +
				"s2    s2  10.0.0.2:4647  follower  false  3\n",
		},
		{name: "stale", args: []string{"-stale"}, wantQuery: "stale=true", wantOut: "s1    s1  10.0.0.1:4647  leader"},
		{name: "json", args: []string{"-json"}, wantOut: `"Index": 12`},
		{name: "json stale", args: []string{"-json", "-stale"}, wantQuery: "stale=true", wantOut: `"Voter": false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.Handle("GET /v1/operator/raft/configuration", rawJSON(raftConfigBody))
			r := f.Run(t, "", append([]string{"operator", "raft", "list-peers"}, tt.args...)...)
			clitest.WantCode(t, r, 0)
			clitest.WantContains(t, "stdout", r.Out, tt.wantOut)
			if q := f.Request("GET /v1/operator/raft/configuration").Query; q != tt.wantQuery {
				t.Errorf("query %q, want %q", q, tt.wantQuery)
			}
		})
	}

	f := clitest.NewFakeAgent(t)
	f.Fail("GET /v1/operator/raft/configuration", 503, "No cluster leader")
	r := f.Run(t, "", "operator", "raft", "list-peers")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "stderr", r.ErrOut, "Failed to retrieve raft configuration: Unexpected response code: 503 (No cluster leader)")
}

func TestRaftRemovePeer(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		agent     func(f *clitest.FakeAgent)
		wantCode  int
		wantQuery string // "" when no request may be made
		wantOut   string
		wantErr   string
	}{
		{
			name: "by id", args: []string{"-peer-id=s2"}, wantCode: 0, wantQuery: "id=s2",
			wantOut: `Removed peer with id "s2"`,
		},
		{
			name: "by address", args: []string{"-peer-address", "10.0.0.2:4647"}, wantCode: 0, wantQuery: "address=10.0.0.2%3A4647",
			wantOut: `Removed peer with address "10.0.0.2:4647"`,
		},
		{
			name: "unknown peer", args: []string{"-peer-id=s9"}, wantCode: 1, wantQuery: "id=s9",
			agent:   func(f *clitest.FakeAgent) { f.Fail("DELETE /v1/operator/raft/peer", 404, `raft peer "s9" not found`) },
			wantErr: `Error removing peer: Unexpected response code: 404 (raft peer "s9" not found)`,
		},
		{name: "neither", wantCode: 1, wantErr: "Missing peer address/ID"},
		{name: "both", args: []string{"-peer-id=s2", "-peer-address=10.0.0.2:4647"}, wantCode: 1, wantErr: "Cannot give both"},
		{name: "argument", args: []string{"-peer-id=s2", "s3"}, wantCode: 1, wantErr: "This command takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clitest.NewFakeAgent(t)
			f.Handle("DELETE /v1/operator/raft/peer", func(w http.ResponseWriter, r *http.Request) {})
			if tt.agent != nil {
				tt.agent(f)
			}
			r := f.Run(t, "", append([]string{"operator", "raft", "remove-peer"}, tt.args...)...)
			clitest.WantCode(t, r, tt.wantCode)
			clitest.WantContains(t, "stdout", r.Out, tt.wantOut)
			clitest.WantContains(t, "stderr", r.ErrOut, tt.wantErr)
			f.Mu.Lock()
			n := len(f.Reqs)
			f.Mu.Unlock()
			if tt.wantQuery == "" {
				if n != 0 {
					t.Errorf("a refused command made %d requests", n)
				}
				return
			}
			if q := f.Request("DELETE /v1/operator/raft/peer").Query; q != tt.wantQuery {
				t.Errorf("query %q, want %q", q, tt.wantQuery)
			}
		})
	}
}

func TestClusterCommandGroups(t *testing.T) {
	for _, group := range [][]string{{"operator"}, {"operator", "raft"}, {"server"}} {
		r := clitest.RunCLI(t, nil, "", nil, group...)
		clitest.WantCode(t, r, 0)
		if !strings.Contains(r.ErrOut, "raft list-peers") && !strings.Contains(r.ErrOut, "members") {
			t.Errorf("%v lists no subcommands:\n%s", group, r.ErrOut)
		}
	}
}

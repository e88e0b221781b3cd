package httpapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// fakeCluster is a fakeServer that runs in a cluster.
type fakeCluster struct {
	*fakeServer

	mu         sync.Mutex
	isLeader   bool
	leaderHTTP string
	members    []ClusterMember
	peers      []RaftPeer
	index      uint64
	clusterErr error // returned by ClusterMembers and ClusterRaftPeers
	removed    []RaftPeer
}

func (f *fakeCluster) IsLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isLeader
}

func (f *fakeCluster) LeaderHTTPAddr(context.Context) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leaderHTTP
}

func (f *fakeCluster) ClusterMembers(context.Context) ([]ClusterMember, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members, f.clusterErr
}

func (f *fakeCluster) ClusterRaftPeers() ([]RaftPeer, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peers, f.index, f.clusterErr
}

func (f *fakeCluster) ClusterRemoveRaftPeer(_ context.Context, id, addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.peers {
		if (id != "" && p.ID == id) || (addr != "" && p.Address == addr) {
			f.removed = append(f.removed, p)
			f.peers = append(f.peers[:i:i], f.peers[i+1:]...)
			return nil
		}
	}
	return structs.NewError(structs.ErrNotFound, "raft peer %q not found", id+addr)
}

func (f *fakeCluster) setLeader(isLeader bool, leaderHTTP string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.isLeader, f.leaderHTTP = isLeader, leaderHTTP
}

var _ Cluster = (*fakeCluster)(nil)

// newClusterAPI builds an API over a fake three-server cluster in which
// this server ("s1") leads.
func newClusterAPI(t *testing.T, cfg Config) (*HTTPServer, *fakeCluster) {
	t.Helper()
	store, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{
		fakeServer: &fakeServer{store: store, leader: "10.0.0.1:4647"},
		isLeader:   true,
		members: []ClusterMember{
			{Name: "s2", Address: "10.0.0.2:4647", Status: "failed", RaftID: "s2"},
			{Name: "s1", Address: "10.0.0.1", Port: 4647, Status: "alive", Leader: true, Region: "global",
				Datacenter: "dc1", Version: "0.3.0", RaftID: "s1"},
			{Name: "s3", Address: "10.0.0.3:4647", Region: "global", Datacenter: "dc2", Version: "0.3.0", RaftID: "s3"},
		},
		peers: []RaftPeer{
			{ID: "s1", Node: "s1", Address: "10.0.0.1:4647", Leader: true, Voter: true},
			{ID: "s2", Node: "s2", Address: "10.0.0.2:4647", Voter: true},
			{ID: "s3", Node: "s3", Address: "10.0.0.3:4647", Voter: false, RaftProtocol: "2"},
		},
		index: 12,
	}
	cfg.Server = fc
	return New(cfg), fc
}

func TestAgentMembers(t *testing.T) {
	tests := []struct {
		name       string
		nodeName   string
		isLeader   bool
		wantServer string
	}{
		{name: "leader names itself", isLeader: true, wantServer: "s1"},
		{name: "configured name", nodeName: "s2", isLeader: false, wantServer: "s2"},
		{name: "follower without a name", isLeader: false, wantServer: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, fc := newClusterAPI(t, Config{NodeName: tt.nodeName})
			fc.setLeader(tt.isLeader, "")
			rec := do(t, api.Handler(), "GET", "/v1/agent/members", "")
			mustOK(t, rec)
			got := decodeJSON[serverMembers](t, rec)
			if got.ServerName != tt.wantServer || got.ServerRegion != "global" || got.ServerDC != "dc1" {
				t.Errorf("server = %q/%q/%q, want %q/global/dc1", got.ServerName, got.ServerRegion, got.ServerDC, tt.wantServer)
			}
			var names []string
			for _, m := range got.Members {
				names = append(names, m.Name)
			}
			if strings.Join(names, ",") != "s1,s2,s3" {
				t.Fatalf("members %v, want sorted s1,s2,s3", names)
			}
			s1, s2, s3 := got.Members[0], got.Members[1], got.Members[2]
			if s1.Addr != "10.0.0.1" || s1.Port != 4647 || s1.Status != "alive" {
				t.Errorf("s1 = %+v", s1)
			}
			wantTags := map[string]string{"role": "drover", "region": "global", "dc": "dc1", "build": "0.3.0",
				"port": "4647", "rpc_addr": "10.0.0.1", "raft_vsn": "3", "id": "s1", "leader": "true"}
			for k, v := range wantTags {
				if s1.Tags[k] != v {
					t.Errorf("s1 tag %s = %q, want %q", k, s1.Tags[k], v)
				}
			}
			// A host:port address is split; a missing status means alive.
			if s2.Addr != "10.0.0.2" || s2.Port != 4647 || s2.Status != "failed" || s2.Tags["leader"] != "false" {
				t.Errorf("s2 = %+v", s2)
			}
			if s3.Status != "alive" || s3.Tags["dc"] != "dc2" {
				t.Errorf("s3 = %+v", s3)
			}
		})
	}
}

func TestClusterEndpointErrors(t *testing.T) {
	plain, _ := newTestAPI(t, Config{})
	failing, fc := newClusterAPI(t, Config{})
	fc.clusterErr = structs.NewError(structs.ErrNoLeader, "No cluster leader")
	tests := []struct {
		name, method, target string
		api                  *HTTPServer
		wantCode             int
		wantBody             string
	}{
		{"members without cluster", "GET", "/v1/agent/members", plain, http.StatusNotImplemented, "does not run in a cluster"},
		{"raft config without cluster", "GET", "/v1/operator/raft/configuration?stale", plain, http.StatusNotImplemented, "does not run in a cluster"},
		{"remove peer without cluster", "DELETE", "/v1/operator/raft/peer?id=s2", plain, http.StatusNotImplemented, "does not run in a cluster"},
		{"members failing", "GET", "/v1/agent/members", failing, http.StatusServiceUnavailable, "No cluster leader"},
		{"raft config failing", "GET", "/v1/operator/raft/configuration", failing, http.StatusServiceUnavailable, "No cluster leader"},
		{"peers failing", "GET", "/v1/status/peers", failing, http.StatusServiceUnavailable, "No cluster leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, tt.api.Handler(), tt.method, tt.target, "")
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestRaftConfiguration(t *testing.T) {
	api, _ := newClusterAPI(t, Config{})
	rec := do(t, api.Handler(), "GET", "/v1/operator/raft/configuration", "")
	mustOK(t, rec)
	if h := rec.Header().Get(headerIndex); h != "12" {
		t.Errorf("X-Nomad-Index = %q, want 12", h)
	}
	got := decodeJSON[raftConfiguration](t, rec)
	want := []RaftPeer{
		{ID: "s1", Node: "s1", Address: "10.0.0.1:4647", Leader: true, Voter: true, RaftProtocol: "3"},
		{ID: "s2", Node: "s2", Address: "10.0.0.2:4647", Voter: true, RaftProtocol: "3"},
		{ID: "s3", Node: "s3", Address: "10.0.0.3:4647", RaftProtocol: "2"},
	}
	if got.Index != 12 || len(got.Servers) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got.Servers[i] != want[i] {
			t.Errorf("server %d = %+v, want %+v", i, got.Servers[i], want[i])
		}
	}
}

func TestRaftRemovePeer(t *testing.T) {
	tests := []struct {
		name, method, target string
		wantCode             int
		wantBody             string
		wantRemoved          string // ID of the removed peer
	}{
		{"by id", "DELETE", "/v1/operator/raft/peer?id=s2", http.StatusOK, "", "s2"},
		{"by address", "DELETE", "/v1/operator/raft/peer?address=10.0.0.3:4647", http.StatusOK, "", "s3"},
		{"neither", "DELETE", "/v1/operator/raft/peer", http.StatusBadRequest, "Must specify either ?id", ""},
		{"both", "DELETE", "/v1/operator/raft/peer?id=s2&address=10.0.0.2:4647", http.StatusBadRequest, "only one of", ""},
		{"unknown id", "DELETE", "/v1/operator/raft/peer?id=s9", http.StatusNotFound, `raft peer "s9" not found`, ""},
		{"unknown address", "DELETE", "/v1/operator/raft/peer?address=10.9.9.9:4647", http.StatusNotFound, "not found", ""},
		{"wrong method", "PUT", "/v1/operator/raft/peer?id=s2", http.StatusMethodNotAllowed, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api, fc := newClusterAPI(t, Config{})
			rec := do(t, api.Handler(), tt.method, tt.target, "")
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if tt.wantCode == http.StatusOK && rec.Body.Len() != 0 {
				t.Errorf("body %q, want empty", rec.Body.String())
			}
			fc.mu.Lock()
			defer fc.mu.Unlock()
			switch {
			case tt.wantRemoved == "" && len(fc.removed) != 0:
				t.Errorf("removed %+v, want nothing", fc.removed)
			case tt.wantRemoved != "" && (len(fc.removed) != 1 || fc.removed[0].ID != tt.wantRemoved):
				t.Errorf("removed %+v, want %s", fc.removed, tt.wantRemoved)
			}
		})
	}
}

func TestStatusPeers(t *testing.T) {
	clustered, _ := newClusterAPI(t, Config{})
	plain, _ := newTestAPI(t, Config{})
	leaderless, fake := newTestAPI(t, Config{})
	fake.leader = ""
	tests := []struct {
		name string
		api  *HTTPServer
		want []string
	}{
		{"raft configuration", clustered, []string{"10.0.0.1:4647", "10.0.0.2:4647", "10.0.0.3:4647"}},
		{"leader alone", plain, []string{"127.0.0.1:4647"}},
		{"no leader", leaderless, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, tt.api.Handler(), "GET", "/v1/status/peers", "")
			mustOK(t, rec)
			got := decodeJSON[[]string](t, rec)
			if got == nil || strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("peers %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestClusterMemberAddress(t *testing.T) {
	tests := []struct {
		in       ClusterMember
		wantAddr string
		wantPort int
	}{
		{ClusterMember{Address: "10.0.0.1", Port: 4647}, "10.0.0.1", 4647},
		{ClusterMember{Address: "10.0.0.1:5000"}, "10.0.0.1", 5000},
		{ClusterMember{Address: "10.0.0.1:5000", Port: 4647}, "10.0.0.1", 4647},
		{ClusterMember{Address: "[::1]:4647"}, "::1", 4647},
	}
	for _, tt := range tests {
		got := toAgentMember(tt.in)
		if got.Addr != tt.wantAddr || got.Port != tt.wantPort {
			t.Errorf("%+v → %s %d, want %s %d", tt.in, got.Addr, got.Port, tt.wantAddr, tt.wantPort)
		}
	}
}

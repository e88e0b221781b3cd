package rpc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// listFSM is the smallest useful FSM: it appends every entry.
type listFSM struct {
	mu      sync.Mutex
	entries []string
}

func (f *listFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, string(l.Data))
	return len(f.entries)
}

func (f *listFSM) has(entry string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.entries, entry)
}

func (f *listFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return listSnapshot(slices.Clone(f.entries)), nil
}

func (f *listFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var entries []string
	if err := json.NewDecoder(rc).Decode(&entries); err != nil {
		return err
	}
	f.mu.Lock()
	f.entries = entries
	f.mu.Unlock()
	return nil
}

type listSnapshot []string

func (s listSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (listSnapshot) Release() {}

type raftNode struct {
	id    raft.ServerID
	addr  raft.ServerAddress
	mux   *Mux
	layer *RaftLayer
	fsm   *listFSM
	raft  *raft.Raft
}

// TestRaftOverMux runs a two-server Raft cluster whose transport is
// RaftLayer on muxed ports that also serve gRPC, with and without TLS.
func TestRaftOverMux(t *testing.T) {
	ca := newTestCA(t, "ca")
	serverTLS, clientTLS := tlsPair(t, ca, "agent", true, ServerName(""), ServerName(""))
	tests := []struct {
		name      string
		serverTLS *tls.Config
		clientTLS *tls.Config
	}{
		{"plaintext", nil, nil},
		{"tls", serverTLS, clientTLS},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*raftNode, 2)
			var servers []raft.Server
			for i := range nodes {
				id := raft.ServerID([]string{"a", "b"}[i])
				m := startMux(t, tc.serverTLS, nil, echoServer)
				layer, err := NewRaftLayer(m.mux.RaftListener(), nil, tc.clientTLS)
				if err != nil {
					t.Fatal(err)
				}
				nodes[i] = &raftNode{id: id, addr: raft.ServerAddress(m.addr), mux: m.mux, layer: layer, fsm: &listFSM{}}
				servers = append(servers, raft.Server{ID: id, Address: nodes[i].addr})
			}
			for _, n := range nodes {
				startRaft(t, n, servers)
			}

			var leader *raftNode
			waitFor(t, 30*time.Second, "a leader", func() bool {
				for _, n := range nodes {
					if n.raft.State() == raft.Leader {
						leader = n
						return true
					}
				}
				return false
			})
			if err := leader.raft.Apply([]byte("hello"), 10*time.Second).Error(); err != nil {
				t.Fatalf("apply: %v", err)
			}
			for _, n := range nodes {
				waitFor(t, 30*time.Second, "entry on "+string(n.id), func() bool { return n.fsm.has("hello") })
			}

			// gRPC shares the port Raft is using.
			for _, n := range nodes {
				msg := "beside raft"
				got, err := Call[string, string](context.Background(), dial(t, string(n.addr), tc.clientTLS), "Echo", &msg)
				if err != nil || *got != msg {
					t.Fatalf("gRPC on %s: %v", n.id, err)
				}
			}
		})
	}
}

func startRaft(t *testing.T, n *raftNode, servers []raft.Server) {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = n.id
	// Fast elections, yet loose enough for -race on a loaded two-core box.
	conf.HeartbeatTimeout = 300 * time.Millisecond
	conf.ElectionTimeout = 300 * time.Millisecond
	conf.LeaderLeaseTimeout = 150 * time.Millisecond
	conf.CommitTimeout = 10 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()

	store := raft.NewInmemStore()
	snaps := raft.NewInmemSnapshotStore()
	trans := raft.NewNetworkTransportWithLogger(n.layer, 3, 10*time.Second, hclog.NewNullLogger())
	if err := raft.BootstrapCluster(conf, store, store, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
		t.Fatal(err)
	}
	r, err := raft.NewRaft(conf, n.fsm, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	n.raft = r
	t.Cleanup(func() {
		if err := r.Shutdown().Error(); err != nil {
			t.Errorf("raft shutdown: %v", err)
		}
		_ = trans.Close()
	})
}

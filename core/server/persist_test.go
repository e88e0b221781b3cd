package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServerRestartKeepsState runs a non-dev server on disk, restarts it
// (once replaying the log, once from a snapshot with a compacted log) and
// checks that every job, eval, alloc and node survived.
func TestServerRestartKeepsState(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		name := "log-replay"
		if snapshot {
			name = "snapshot"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			start := func() *Server {
				s := testServer(t, func(c *Config) {
					onDiskAlone(c, dir, addr)
					c.SnapshotThreshold = 1 << 20
				})
				return s
			}
			s := start()
			ctx := context.Background()
			node := testNode("a")
			if _, err := s.Nodes().Register(ctx, node); err != nil {
				t.Fatal(err)
			}
			resp, err := s.Jobs().Register(ctx, testJob("persist", "sysbatch"), false, 0)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "eval complete", func() bool { return evalStatus(t, s, resp.EvalID) == structs.EvalStatusComplete })
			if snapshot {
				if err := s.raft.Snapshot().Error(); err != nil {
					t.Fatalf("snapshot: %v", err)
				}
			}
			before := s.State().LatestIndex()
			if err := s.Shutdown(); err != nil {
				t.Fatal(err)
			}

			s2 := start()
			st := s2.State()
			waitFor(t, 10*time.Second, "state restored", func() bool { return st.LatestIndex() >= before })
			job, _ := st.JobByID(nil, "default", "persist")
			ev, _ := st.EvalByID(nil, resp.EvalID)
			n, _ := st.NodeByID(nil, node.ID)
			allocs, _ := st.AllocsByJob(nil, "default", "persist", true)
			if job == nil || ev == nil || n == nil || len(allocs) != 1 {
				t.Fatalf("state lost across restart: job=%v eval=%v node=%v allocs=%d", job != nil, ev != nil, n != nil, len(allocs))
			}
			if ev.Status != structs.EvalStatusComplete || allocs[0].NodeID != node.ID || n.SecretID != node.SecretID {
				t.Fatalf("restored state differs: eval %s, alloc node %s", ev.Status, allocs[0].NodeID)
			}
			// The restarted server keeps accepting writes.
			if _, err := s2.Jobs().Register(ctx, testJob("after", "sysbatch"), false, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

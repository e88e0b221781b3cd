package server

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
)

// grepDir reports the files under dir that hold needle.
func grepDir(t *testing.T, dir string, needle []byte) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, needle) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// TestVariablesEncryptedAtRestAndRestart writes variables on an on-disk
// server, rotates the keyring (a full rotation re-seals them), and checks
// that no file of the data dir (Raft log, snapshots) holds a plaintext
// item, that the FSM snapshot does not either, and that the restarted
// server opens every variable, from the log and from a snapshot.
func TestVariablesEncryptedAtRestAndRestart(t *testing.T) {
	testtier.Slow(t, "restarts an on-disk server twice")
	needle := []byte("plaintext-needle-5f3a9c")
	for _, snapshot := range []bool{false, true} {
		name := map[bool]string{false: "log-replay", true: "snapshot"}[snapshot]
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			addr := freeAddr(t)
			start := func() *Server {
				return testServer(t, func(c *Config) {
					c.DevMode, c.DataDir, c.RPCAddr = false, dir, addr
					c.SnapshotThreshold = 1 << 20
				})
			}
			s := start()
			ctx := context.Background()
			vars := s.Variables()
			write := func(path string) {
				t.Helper()
				_, _, _, err := vars.Write(ctx, structs.VarOpSet, &structs.Variable{Path: path,
					Items: structs.VariableItems{"secret": string(needle) + path}}, nil, "")
				if err != nil {
					t.Fatal(err)
				}
			}
			write("a")
			if _, _, err := vars.Rotate(ctx, false); err != nil {
				t.Fatal(err)
			}
			write("b")
			if _, _, err := vars.Rotate(ctx, true); err != nil {
				t.Fatal(err)
			}
			write("c")
			if snapshot {
				if err := s.raft.Snapshot().Error(); err != nil {
					t.Fatal(err)
				}
			}
			// The FSM snapshot (what a backup holds) has the sealed form only.
			var buf bytes.Buffer
			snap, err := s.State().Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if err := snap.Persist(&buf); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(buf.Bytes(), needle) {
				t.Error("the state snapshot holds a plaintext item")
			}
			if !bytes.Contains(buf.Bytes(), []byte(`"Path":"a"`)) {
				t.Error("the state snapshot holds no variable at all")
			}
			before := s.State().LatestIndex()
			if err := s.Shutdown(); err != nil {
				t.Fatal(err)
			}
			if hits := grepDir(t, dir, needle); len(hits) != 0 {
				t.Errorf("plaintext item found in %v", hits)
			}

			s2 := start()
			st := s2.State()
			waitFor(t, 10*time.Second, "state restored", func() bool { return st.LatestIndex() >= before })
			for _, p := range []string{"a", "b", "c"} {
				enc, err := st.VariableByPath(nil, "default", p)
				if err != nil || enc == nil {
					t.Fatalf("variable %s lost: %v", p, err)
				}
				v, err := s2.Variables().Open(enc, false)
				if err != nil || v.Items["secret"] != string(needle)+p {
					t.Errorf("variable %s after restart: %+v, %v", p, v, err)
				}
			}
			keys, _, _ := s2.Variables().Keys(ctx)
			if len(keys) != 3 {
				t.Errorf("%d root keys after restart, want 3", len(keys))
			}
		})
	}
}

// TestVariablesConflictCarriesCurrent: a lost CAS comes back as a
// conflict with the current variable.
func TestVariablesConflictCarriesCurrent(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	vars := s.Variables()
	v, _, _, err := vars.Write(ctx, structs.VarOpSet, &structs.Variable{Path: "x", Items: structs.VariableItems{"k": "1"}}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	zero := uint64(0)
	_, conflict, _, err := vars.Write(ctx, structs.VarOpSet, &structs.Variable{Path: "x", Items: structs.VariableItems{"k": "2"}}, &zero, "")
	if !errors.Is(err, structs.ErrConflict) || conflict == nil || conflict.ModifyIndex != v.ModifyIndex || conflict.Items["k"] != "1" {
		t.Fatalf("conflict: %+v, %v", conflict, err)
	}
}

// TestVariablesThroughFollower: a follower forwards variable writes and
// rotations to the leader, a lost CAS comes back as a conflict with the
// current variable, and the follower opens what the leader sealed with
// the key replicated to it through Raft.
func TestVariablesThroughFollower(t *testing.T) {
	testtier.Slow(t, "runs a two-server cluster")
	var addrs []string
	var lns []net.Listener
	for i := 0; i < 2; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns, addrs = append(lns, ln), append(addrs, ln.Addr().String())
	}
	a := clusterServer(t, "a", lns[0], addrs, nil)
	b := clusterServer(t, "b", lns[1], addrs, nil)
	var leader, follower *Server
	waitFor(t, 30*time.Second, "a leader", func() bool {
		switch {
		case a.IsLeader() && a.established.Load():
			leader, follower = a, b
		case b.IsLeader() && b.established.Load():
			leader, follower = b, a
		default:
			return false
		}
		return true
	})
	waitFor(t, 10*time.Second, "the follower to know the leader", func() bool { return follower.LeaderAddr() != "" })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	v, _, _, err := follower.Variables().Write(ctx, structs.VarOpSet, &structs.Variable{Path: "fwd", Items: structs.VariableItems{"k": "1"}}, nil, "")
	if err != nil || v == nil || v.Items["k"] != "1" {
		t.Fatalf("write through the follower: %+v, %v", v, err)
	}
	stale := v.ModifyIndex - 1
	_, conflict, _, err := follower.Variables().Write(ctx, structs.VarOpSet, &structs.Variable{Path: "fwd", Items: structs.VariableItems{"k": "2"}}, &stale, "")
	if !errors.Is(err, structs.ErrConflict) || conflict == nil || conflict.ModifyIndex != v.ModifyIndex || conflict.Items["k"] != "1" {
		t.Fatalf("stale write through the follower: %+v, %v", conflict, err)
	}
	if _, _, err := follower.Variables().Rotate(ctx, true); err != nil {
		t.Fatalf("rotate through the follower: %v", err)
	}
	for _, s := range []*Server{leader, follower} {
		s := s
		waitFor(t, 30*time.Second, "the variable and both keys on "+s.cfg.NodeName, func() bool {
			keys, _, _ := s.Variables().Keys(ctx)
			enc, _ := s.State().VariableByPath(nil, "default", "fwd")
			if len(keys) != 2 || enc == nil {
				return false
			}
			got, err := s.Variables().Open(enc, false)
			return err == nil && got.Items["k"] == "1" && enc.KeyID != v2KeyID(keys)
		})
	}
}

// v2KeyID is the inactive key's ID of a two-key keyring: after a full
// rotation no variable is sealed under it.
func v2KeyID(keys []*structs.RootKeyMeta) string {
	for _, k := range keys {
		if k.State != structs.RootKeyStateActive {
			return k.KeyID
		}
	}
	return ""
}

// TestVariablesTaskRead: a client reads, with its node's secret, the
// variables its allocation's task may read implicitly; another node, a
// wrong secret, or a path outside the task's are refused or hidden; a
// blocking read wakes on a write.
func TestVariablesTaskRead(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	node := testNode("a")
	if _, err := s.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	other := testNode("b")
	if _, err := s.Nodes().Register(ctx, other); err != nil {
		t.Fatal(err)
	}
	job := testJob("web", "sysbatch")
	if _, err := s.Jobs().Register(ctx, job, false, 0); err != nil {
		t.Fatal(err)
	}
	var alloc *structs.Allocation
	waitFor(t, 10*time.Second, "an allocation on node a", func() bool {
		allocs, _ := s.State().AllocsByNode(nil, node.ID)
		if len(allocs) > 0 {
			alloc = allocs[0]
		}
		return alloc != nil
	})
	group, task := alloc.TaskGroup, job.TaskGroups[0].Tasks[0].Name
	mine := "nomad/jobs/web/" + group + "/" + task
	for _, p := range []string{"nomad/jobs/web", mine, "nomad/jobs/other", "secret"} {
		if _, _, _, err := s.Variables().Write(ctx, structs.VarOpSet, &structs.Variable{Path: p, Items: structs.VariableItems{"k": p}}, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	read := func(a structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
		if a.NodeID == "" {
			a.NodeID, a.SecretID = node.ID, node.SecretID
		}
		a.AllocID, a.Task = alloc.ID, task
		return s.Variables().TaskRead(ctx, &a)
	}
	cases := []struct {
		name string
		args structs.VariableTaskReadArgs
		want string // the item read, "" for none; "denied" for an error
	}{
		{"job path", structs.VariableTaskReadArgs{Path: "nomad/jobs/web"}, "nomad/jobs/web"},
		{"task path", structs.VariableTaskReadArgs{Path: mine}, mine},
		{"another job", structs.VariableTaskReadArgs{Path: "nomad/jobs/other"}, ""},
		{"outside nomad/jobs", structs.VariableTaskReadArgs{Path: "secret"}, ""},
		{"wrong secret", structs.VariableTaskReadArgs{NodeID: node.ID, SecretID: "bad", Path: mine}, "denied"},
		{"another node's alloc", structs.VariableTaskReadArgs{NodeID: other.ID, SecretID: other.SecretID, Path: mine}, "denied"},
	}
	for _, c := range cases {
		r, err := read(c.args)
		switch {
		case c.want == "denied":
			if !errors.Is(err, structs.ErrPermissionDenied) {
				t.Errorf("%s: %v, want permission denied", c.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want == "" && r.Var != nil:
			t.Errorf("%s: read %+v, want nothing", c.name, r.Var)
		case c.want != "" && (r.Var == nil || r.Var.Items["k"] != c.want):
			t.Errorf("%s: read %+v", c.name, r.Var)
		}
	}
	list, err := read(structs.VariableTaskReadArgs{List: true, Prefix: "nomad/"})
	if err != nil || len(list.List) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}

	// A blocking read returns once the variable is written.
	done := make(chan *structs.VariableTaskReadReply, 1)
	go func() {
		r, _ := read(structs.VariableTaskReadArgs{Path: mine, MinIndex: list.Index, MaxWait: time.Minute})
		done <- r
	}()
	if _, _, _, err := s.Variables().Write(ctx, structs.VarOpSet, &structs.Variable{Path: mine, Items: structs.VariableItems{"k": "new"}}, nil, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r == nil || r.Var == nil || r.Var.Items["k"] != "new" || r.Index <= list.Index {
			t.Errorf("blocking read: %+v", r)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blocking read did not wake")
	}
}

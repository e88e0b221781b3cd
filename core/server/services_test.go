package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/pki"
	"github.com/drover-org/drover/core/structs"
)

func serviceAlloc(job *structs.Job, nodeID string, i int) *structs.Allocation {
	return &structs.Allocation{
		ID: uuid.NewString(), Namespace: job.Namespace, EvalID: uuid.NewString(), Name: structs.AllocName(job.ID, "g", i),
		NodeID: nodeID, JobID: job.ID, Job: job, TaskGroup: "g",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning,
	}
}

// servicesServer seeds two nodes, a job and an alloc on each.
func servicesServer(t *testing.T, mut func(*Config)) (*Server, []*structs.Node, []*structs.Allocation) {
	t.Helper()
	s := testServer(t, mut)
	job := testJob("web", "batch")
	job.Canonicalize()
	nodes := []*structs.Node{testNode("a"), testNode("b")}
	a, b := serviceAlloc(job, nodes[0].ID, 0), serviceAlloc(job, nodes[1].ID, 1)
	stored := seedServer(t, s, job, nodes, nil)
	a.Job, b.Job = stored, stored
	if _, err := s.raftApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: stored, AllocsUpdated: []*structs.Allocation{a, b}}); err != nil {
		t.Fatal(err)
	}
	return s, nodes, []*structs.Allocation{a, b}
}

func registration(a *structs.Allocation, name string) *structs.ServiceRegistration {
	return &structs.ServiceRegistration{ID: "_nomad-task-" + a.ID + "-g-" + name + "-http", ServiceName: name,
		AllocID: a.ID, Address: "127.0.0.1", Port: 20001, Tags: []string{"v1"}}
}

func lookup(t *testing.T, s *Server, n *structs.Node, name string) *structs.ServiceLookupReply {
	t.Helper()
	r, err := s.Services().Lookup(context.Background(), &structs.ServiceLookupArgs{NodeID: n.ID, SecretID: n.SecretID, ServiceName: name})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestUpdateServicesRefusals(t *testing.T) {
	s, nodes, allocs := servicesServer(t, nil)
	ctx := context.Background()
	n := nodes[0]
	many := make([]*structs.ServiceRegistration, structs.MaxRegistrationsPerRequest+1)
	for i := range many {
		many[i] = registration(allocs[0], "web")
	}
	tests := []struct {
		name string
		args *structs.ServiceRegistrationNodeArgs
		kind error
	}{
		{"wrong secret", &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: "wrong", Upsert: []*structs.ServiceRegistration{registration(allocs[0], "web")}}, structs.ErrPermissionDenied},
		{"unknown node", &structs.ServiceRegistrationNodeArgs{NodeID: uuid.NewString(), SecretID: n.SecretID}, structs.ErrNotFound},
		{"another node's alloc", &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID, Upsert: []*structs.ServiceRegistration{registration(allocs[1], "web")}}, structs.ErrPermissionDenied},
		{"deleting another node's alloc", &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID, DeleteAllocIDs: []string{allocs[1].ID}}, structs.ErrPermissionDenied},
		{"too many", &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID, Upsert: many}, structs.ErrInvalid},
		{"null registration", &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID, Upsert: []*structs.ServiceRegistration{nil}}, structs.ErrInvalid},
		{"missing service name", &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID, Upsert: []*structs.ServiceRegistration{{ID: "x", AllocID: allocs[0].ID}}}, structs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.State().LatestIndex()
			err := s.Services().Update(ctx, tt.args)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want kind %v", err, tt.kind)
			}
			if s.State().LatestIndex() != before {
				t.Error("a refused update wrote to Raft")
			}
		})
	}
	if regs, _ := s.State().ServiceRegistrations(nil, "*"); len(regs) != 0 {
		t.Errorf("%d registrations stored after refusals", len(regs))
	}
}

// A client's registrations are stored with the server's view of node,
// namespace and job, cut check output, one entry per call; lookups see
// them; a delete removes an alloc's.
func TestUpdateServicesAndLookup(t *testing.T) {
	s, nodes, allocs := servicesServer(t, nil)
	ctx := context.Background()
	n := nodes[0]
	r := registration(allocs[0], "web")
	r.Namespace, r.JobID, r.NodeID = "elsewhere", "other-job", nodes[1].ID
	big := make([]byte, structs.MaxCheckOutputBytes+100)
	r.Checks = []*structs.CheckStatus{{ID: "c", Check: "alive", Status: structs.CheckSuccess, Output: string(big)}}
	before := s.State().LatestIndex()
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID,
		Upsert: []*structs.ServiceRegistration{r, registration(allocs[0], "api")}}); err != nil {
		t.Fatal(err)
	}
	if got := s.State().LatestIndex(); got != before+1 {
		t.Errorf("the update took %d entries, want 1", got-before)
	}
	reply := lookup(t, s, nodes[1], "web") // any node may read
	if len(reply.Services) != 1 || reply.Index == 0 {
		t.Fatalf("lookup = %+v", reply)
	}
	got := reply.Services[0]
	if got.Namespace != structs.DefaultNamespace || got.JobID != "web" || got.NodeID != n.ID || got.Datacenter != "dc1" {
		t.Errorf("stored as %s/%s on %s in %s; want the alloc's namespace, job and node", got.Namespace, got.JobID, got.NodeID, got.Datacenter)
	}
	if len(got.Checks[0].Output) != structs.MaxCheckOutputBytes {
		t.Errorf("check output kept %d bytes, want %d", len(got.Checks[0].Output), structs.MaxCheckOutputBytes)
	}
	// A listing (templates' services, nomadServices) answers every
	// service of the namespace.
	all, err := s.Services().Lookup(ctx, &structs.ServiceLookupArgs{NodeID: n.ID, SecretID: n.SecretID, Namespace: structs.DefaultNamespace, All: true})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range all.Services {
		names[r.ServiceName] = true
	}
	if len(all.Services) != 2 || !names["web"] || !names["api"] {
		t.Errorf("listing = %+v, want web and api", all.Services)
	}
	if _, err := s.Services().Lookup(ctx, &structs.ServiceLookupArgs{NodeID: n.ID, SecretID: n.SecretID}); !errors.Is(err, structs.ErrInvalid) {
		t.Errorf("lookup without a name or All: %v, want invalid", err)
	}
	if _, err := s.Services().Lookup(ctx, &structs.ServiceLookupArgs{NodeID: n.ID, SecretID: "bad", ServiceName: "web"}); !errors.Is(err, structs.ErrPermissionDenied) {
		t.Errorf("lookup with a wrong secret: %v", err)
	}
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID, DeleteAllocIDs: []string{allocs[0].ID}}); err != nil {
		t.Fatal(err)
	}
	if regs, _ := s.State().ServiceRegistrations(nil, "*"); len(regs) != 0 {
		t.Errorf("%d registrations left after the delete", len(regs))
	}
}

// A lookup with MinIndex blocks until the service changes, then answers
// the new registrations; without a change it returns at MaxWait.
func TestLookupServicesBlocks(t *testing.T) {
	s, nodes, allocs := servicesServer(t, nil)
	ctx := context.Background()
	n := nodes[0]
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID,
		Upsert: []*structs.ServiceRegistration{registration(allocs[0], "web")}}); err != nil {
		t.Fatal(err)
	}
	first := lookup(t, s, n, "web")

	start := time.Now()
	r, err := s.Services().Lookup(ctx, &structs.ServiceLookupArgs{NodeID: n.ID, SecretID: n.SecretID, ServiceName: "web",
		MinIndex: first.Index, MaxWait: 200 * time.Millisecond})
	if err != nil || r.Index != first.Index || len(r.Services) != 1 {
		t.Fatalf("idle lookup = %+v, %v", r, err)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Errorf("the idle lookup returned after %s, before its MaxWait", waited)
	}

	type result struct {
		r   *structs.ServiceLookupReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.Services().Lookup(ctx, &structs.ServiceLookupArgs{NodeID: n.ID, SecretID: n.SecretID, ServiceName: "web",
			MinIndex: first.Index, MaxWait: time.Minute})
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		t.Fatalf("the lookup returned before any change: %+v", res.r)
	case <-time.After(100 * time.Millisecond):
	}
	// A change to the same service on the other node wakes it.
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: nodes[1].ID, SecretID: nodes[1].SecretID,
		Upsert: []*structs.ServiceRegistration{registration(allocs[1], "web")}}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.err != nil || res.r.Index <= first.Index || len(res.r.Services) != 2 {
			t.Fatalf("woken lookup = %+v, %v", res.r, res.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blocked lookup did not wake")
	}
}

// The client's terminal alloc update deletes the alloc's registrations in
// the same entry; registrations of a stopped alloc are not accepted.
func TestServicesEndWithTheirAlloc(t *testing.T) {
	s, nodes, allocs := servicesServer(t, nil)
	ctx := context.Background()
	n := nodes[0]
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID,
		Upsert: []*structs.ServiceRegistration{registration(allocs[0], "web")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Nodes().UpdateAllocs(ctx, n.ID, n.SecretID, []*structs.Allocation{{ID: allocs[0].ID, ClientStatus: structs.AllocClientStatusComplete}}); err != nil {
		t.Fatal(err)
	}
	if r := lookup(t, s, n, "web"); len(r.Services) != 0 {
		t.Fatalf("%d registrations after the alloc completed", len(r.Services))
	}
	before := s.State().LatestIndex()
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID,
		Upsert: []*structs.ServiceRegistration{registration(allocs[0], "web")}}); err != nil {
		t.Fatalf("a late registration of a stopped alloc: %v", err)
	}
	if r := lookup(t, s, n, "web"); len(r.Services) != 0 || s.State().LatestIndex() != before {
		t.Fatal("a stopped alloc's registration was stored")
	}
}

// A node whose heartbeats stop is marked down and its registrations go.
func TestServicesEndWhenNodeGoesDown(t *testing.T) {
	s := testServer(t, func(c *Config) {
		c.HeartbeatTTL = 200 * time.Millisecond
		c.HeartbeatGrace = 200 * time.Millisecond
	})
	ctx := context.Background()
	n := testNode("a")
	if _, err := s.Nodes().Register(ctx, n); err != nil {
		t.Fatal(err)
	}
	job := testJob("web", "batch")
	job.Canonicalize()
	stored := seedServer(t, s, job, nil, nil)
	a := serviceAlloc(stored, n.ID, 0)
	if _, err := s.raftApply(structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: stored, AllocsUpdated: []*structs.Allocation{a}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID,
		Upsert: []*structs.ServiceRegistration{registration(a, "web")}}); err != nil {
		t.Fatal(err)
	}
	if regs, _ := s.State().ServiceRegistrationsByNodeID(nil, n.ID); len(regs) != 1 {
		t.Fatalf("%d registrations before the node went down, want 1", len(regs))
	}
	waitFor(t, 15*time.Second, "node down and its registrations gone", func() bool {
		node, _ := s.State().NodeByID(nil, n.ID)
		regs, _ := s.State().ServiceRegistrationsByNodeID(nil, n.ID)
		return node.Status == structs.NodeStatusDown && len(regs) == 0
	})
}

func TestDeleteServiceRegistration(t *testing.T) {
	s, nodes, allocs := servicesServer(t, nil)
	ctx := context.Background()
	n := nodes[0]
	r := registration(allocs[0], "web")
	if err := s.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: n.ID, SecretID: n.SecretID, Upsert: []*structs.ServiceRegistration{r}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][3]string{{"other", "web", r.ID}, {"default", "api", r.ID}, {"default", "web", "nope"}} {
		if _, err := s.Services().Delete(ctx, bad[0], bad[1], bad[2]); !errors.Is(err, structs.ErrNotFound) {
			t.Errorf("delete %v: %v, want not found", bad, err)
		}
	}
	if _, err := s.Services().Delete(ctx, "default", "web", r.ID); err != nil {
		t.Fatal(err)
	}
	if regs, _ := s.State().ServiceRegistrations(nil, "*"); len(regs) != 0 {
		t.Errorf("%d registrations left after the delete", len(regs))
	}
}

// With the cluster PKI, a client's certificate lets it update and read
// services for its own node only.
func TestServiceRPCAccess(t *testing.T) {
	own, other := pki.Identity{Role: pki.RoleClient, ID: "node-a"}, pki.Identity{Role: pki.RoleClient, ID: "node-b"}
	reqs := map[string]any{
		"ServiceRegistration.NodeUpdate": &structs.ServiceRegistrationNodeArgs{NodeID: "node-a"},
		"ServiceRegistration.Lookup":     &structs.ServiceLookupArgs{NodeID: "node-a"},
	}
	for method, req := range reqs {
		rule, ok := rpcAccess[method]
		if !ok || rule.Public || rule.Check == nil {
			t.Fatalf("%s: no per-node rule", method)
		}
		if err := rule.Check(own, req); err != nil {
			t.Errorf("%s by its own node: %v", method, err)
		}
		if err := rule.Check(other, req); err == nil {
			t.Errorf("%s by another node's client was allowed", method)
		}
	}
	if _, listed := rpcAccess["ServiceRegistration.Delete"]; listed {
		t.Error("ServiceRegistration.Delete must be server-only")
	}
}

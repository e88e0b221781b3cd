package state

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/structs"
)

// serviceFixture stores a node, a job and two running allocs on the node.
func serviceFixture(t *testing.T) (*StateStore, *structs.Node, []*structs.Allocation) {
	t.Helper()
	s := testStore(t)
	node := mockNode()
	must(t, s.UpsertNode(10, node))
	job := storedJob(t, s, 11, mockJob("service"))
	a1, a2 := mockAlloc(job, node.ID), mockAlloc(job, node.ID)
	must(t, s.UpsertAllocs(12, []*structs.Allocation{a1, a2}))
	must(t, s.UpdateAllocsFromClient(13, []*structs.Allocation{
		clientUpdate(a1.ID, structs.AllocClientStatusRunning), clientUpdate(a2.ID, structs.AllocClientStatusRunning)}))
	return s, node, []*structs.Allocation{a1, a2}
}

func reg(a *structs.Allocation, name string) *structs.ServiceRegistration {
	return &structs.ServiceRegistration{
		ID: "_nomad-task-" + a.ID + "-web-" + name + "-http", ServiceName: name, Namespace: a.Namespace,
		NodeID: a.NodeID, Datacenter: "dc1", JobID: a.JobID, AllocID: a.ID, Address: "10.0.0.1", Port: 8080,
	}
}

func regIDs(t *testing.T, regs []*structs.ServiceRegistration, err error) []string {
	t.Helper()
	must(t, err)
	out := make([]string, 0, len(regs))
	for _, r := range regs {
		out = append(out, r.ServiceName+"/"+r.AllocID[:4])
	}
	return out
}

func TestServiceRegistrationUpsertKeepsCreateIndex(t *testing.T) {
	s, _, allocs := serviceFixture(t)
	r := reg(allocs[0], "web")
	must(t, s.UpsertServiceRegistrations(20, []*structs.ServiceRegistration{r}))
	// Unchanged: not written again, the table's index stays.
	must(t, s.UpsertServiceRegistrations(21, []*structs.ServiceRegistration{reg(allocs[0], "web")}))
	if got := s.Index(TableServiceRegistrations); got != 20 {
		t.Errorf("index after an unchanged upsert = %d, want 20", got)
	}
	changed := reg(allocs[0], "web")
	changed.Tags = []string{"v2"}
	must(t, s.UpsertServiceRegistrations(22, []*structs.ServiceRegistration{changed}))
	got, err := s.ServiceRegistrationByID(nil, r.ID)
	must(t, err)
	if got == nil || got.CreateIndex != 20 || got.ModifyIndex != 22 || len(got.Tags) != 1 {
		t.Fatalf("stored = %+v, want CreateIndex 20, ModifyIndex 22, tags [v2]", got)
	}
	if r.CreateIndex != 0 {
		t.Error("the caller's registration was modified")
	}
}

// Registrations of an unknown or client-terminal alloc, of an unknown
// node, or without an ID, are skipped rather than failing the entry; so
// are all of a node that is down.
func TestServiceRegistrationUpsertSkipsBad(t *testing.T) {
	s, _, allocs := serviceFixture(t)
	must(t, s.UpdateAllocsFromClient(20, []*structs.Allocation{clientUpdate(allocs[1].ID, structs.AllocClientStatusComplete)}))
	unknown := reg(allocs[0], "ghost")
	unknown.AllocID = "no-such-alloc"
	otherNode := reg(allocs[0], "elsewhere")
	otherNode.NodeID = "no-such-node"
	must(t, s.UpsertServiceRegistrations(21, []*structs.ServiceRegistration{
		nil, {ServiceName: "noid"}, unknown, otherNode, reg(allocs[1], "done"), reg(allocs[0], "web"),
	}))
	all, err := s.ServiceRegistrations(nil, AllNamespaces)
	if got := regIDs(t, all, err); len(got) != 1 || got[0] != "web/"+allocs[0].ID[:4] {
		t.Errorf("stored = %v, want only web of the running alloc", got)
	}
	must(t, s.UpdateNodeStatus(22, allocs[0].NodeID, structs.NodeStatusDown, 1, nil))
	must(t, s.UpsertServiceRegistrations(23, []*structs.ServiceRegistration{reg(allocs[0], "web")}))
	if all, err := s.ServiceRegistrations(nil, AllNamespaces); len(regIDs(t, all, err)) != 0 {
		t.Errorf("a down node's registration was stored")
	}
}

func TestServiceRegistrationDeletes(t *testing.T) {
	tests := []struct {
		name   string
		delete func(t *testing.T, s *StateStore, node *structs.Node, allocs []*structs.Allocation)
		left   int
	}{
		{"by id", func(t *testing.T, s *StateStore, _ *structs.Node, a []*structs.Allocation) {
			must(t, s.DeleteServiceRegistrationByID(30, structs.DefaultNamespace, reg(a[0], "web").ID))
		}, 3},
		{"by id in another namespace deletes nothing", func(t *testing.T, s *StateStore, _ *structs.Node, a []*structs.Allocation) {
			must(t, s.DeleteServiceRegistrationByID(30, "other", reg(a[0], "web").ID))
		}, 4},
		{"by alloc ids", func(t *testing.T, s *StateStore, _ *structs.Node, a []*structs.Allocation) {
			must(t, s.DeleteServiceRegistrationsByAllocIDs(30, []string{a[0].ID}))
		}, 2},
		{"by node id", func(t *testing.T, s *StateStore, n *structs.Node, _ []*structs.Allocation) {
			must(t, s.DeleteServiceRegistrationsByNodeID(30, n.ID))
		}, 0},
		{"alloc becomes client-terminal", func(t *testing.T, s *StateStore, _ *structs.Node, a []*structs.Allocation) {
			must(t, s.UpdateAllocsFromClient(30, []*structs.Allocation{clientUpdate(a[1].ID, structs.AllocClientStatusFailed)}))
		}, 2},
		{"node goes down", func(t *testing.T, s *StateStore, n *structs.Node, _ []*structs.Allocation) {
			must(t, s.UpdateNodeStatus(30, n.ID, structs.NodeStatusDown, 1, nil))
		}, 0},
		{"node goes initializing keeps them", func(t *testing.T, s *StateStore, n *structs.Node, _ []*structs.Allocation) {
			must(t, s.UpdateNodeStatus(30, n.ID, structs.NodeStatusInit, 1, nil))
		}, 4},
		{"node deleted", func(t *testing.T, s *StateStore, n *structs.Node, _ []*structs.Allocation) {
			must(t, s.DeleteNode(30, []string{n.ID}))
		}, 0},
		{"alloc reaped", func(t *testing.T, s *StateStore, _ *structs.Node, a []*structs.Allocation) {
			must(t, s.DeleteEval(30, nil, []string{a[0].ID}))
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, node, allocs := serviceFixture(t)
			must(t, s.UpsertServiceRegistrations(20, []*structs.ServiceRegistration{
				reg(allocs[0], "web"), reg(allocs[0], "api"), reg(allocs[1], "web"), reg(allocs[1], "api"),
			}))
			tt.delete(t, s, node, allocs)
			all, err := s.ServiceRegistrations(nil, AllNamespaces)
			must(t, err)
			if len(all) != tt.left {
				t.Errorf("%d registrations left, want %d: %v", len(all), tt.left, regIDs(t, all, nil))
			}
			if want := uint64(30); tt.left < 4 && s.Index(TableServiceRegistrations) != want {
				t.Errorf("table index = %d, want %d", s.Index(TableServiceRegistrations), want)
			}
		})
	}
}

func TestServiceRegistrationReads(t *testing.T) {
	s, node, allocs := serviceFixture(t)
	other := reg(allocs[1], "web")
	other.Namespace = "other"
	other.ID += "-x"
	must(t, s.UpsertServiceRegistrations(20, []*structs.ServiceRegistration{
		reg(allocs[0], "web"), reg(allocs[0], "api"), reg(allocs[1], "web"), other,
	}))
	byName, err := s.ServiceRegistrationsByName(nil, structs.DefaultNamespace, "web")
	if got := regIDs(t, byName, err); len(got) != 2 {
		t.Errorf("by name = %v, want 2", got)
	}
	inNS, err := s.ServiceRegistrations(nil, "other")
	if got := regIDs(t, inNS, err); len(got) != 1 {
		t.Errorf("namespace other = %v, want 1", got)
	}
	byAlloc, err := s.ServiceRegistrationsByAllocID(nil, allocs[0].ID)
	if got := regIDs(t, byAlloc, err); len(got) != 2 {
		t.Errorf("by alloc = %v, want 2", got)
	}
	byNode, err := s.ServiceRegistrationsByNodeID(nil, node.ID)
	if got := regIDs(t, byNode, err); len(got) != 4 {
		t.Errorf("by node = %v, want 4", got)
	}
	byJob, err := s.ServiceRegistrationsByJobID(nil, structs.DefaultNamespace, allocs[0].JobID)
	if got := regIDs(t, byJob, err); len(got) != 3 {
		t.Errorf("by job = %v, want 3", got)
	}
}

// A blocking read of a service wakes when one of its registrations is
// written.
func TestServiceRegistrationBlocking(t *testing.T) {
	s, _, allocs := serviceFixture(t)
	must(t, s.UpsertServiceRegistrations(20, []*structs.ServiceRegistration{reg(allocs[0], "web")}))
	done := make(chan uint64, 1)
	go func() {
		idx, _ := s.BlockingQuery(context.Background(), 20, func(ws memdb.WatchSet, s *StateStore) (uint64, error) {
			_, err := s.ServiceRegistrationsByName(ws, structs.DefaultNamespace, "web")
			return s.Index(TableServiceRegistrations), err
		})
		done <- idx
	}()
	must(t, s.UpsertServiceRegistrations(21, []*structs.ServiceRegistration{reg(allocs[1], "web")}))
	select {
	case idx := <-done:
		if idx != 21 {
			t.Errorf("woke at %d, want 21", idx)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blocking read did not wake")
	}
}

func TestServiceRegistrationSnapshot(t *testing.T) {
	s, _, allocs := serviceFixture(t)
	r := reg(allocs[0], "web")
	r.Tags = []string{"a"}
	r.Checks = []*structs.CheckStatus{{ID: "c1", Check: "alive", Status: structs.CheckSuccess, Timestamp: 7}}
	must(t, s.UpsertServiceRegistrations(20, []*structs.ServiceRegistration{r}))
	restored := roundTrip(t, s)
	got, err := restored.ServiceRegistrationByID(nil, r.ID)
	must(t, err)
	if got == nil || got.CreateIndex != 20 || len(got.Checks) != 1 || got.Checks[0].Status != structs.CheckSuccess || got.Tags[0] != "a" {
		t.Fatalf("restored = %+v", got)
	}
	if restored.Index(TableServiceRegistrations) != 20 {
		t.Errorf("restored table index = %d, want 20", restored.Index(TableServiceRegistrations))
	}
	byName, err := restored.ServiceRegistrationsByName(nil, structs.DefaultNamespace, "web")
	if got := regIDs(t, byName, err); len(got) != 1 {
		t.Errorf("restored by name = %v", got)
	}
}

// A registration that comes back under another service name (same ID)
// leaves the old name's index.
func TestServiceRegistrationRenamed(t *testing.T) {
	s, _, allocs := serviceFixture(t)
	r := reg(allocs[0], "web")
	must(t, s.UpsertServiceRegistrations(20, []*structs.ServiceRegistration{r}))
	renamed := *r
	renamed.ServiceName = "api"
	must(t, s.UpsertServiceRegistrations(21, []*structs.ServiceRegistration{&renamed}))
	web, err := s.ServiceRegistrationsByName(nil, structs.DefaultNamespace, "web")
	if got := regIDs(t, web, err); len(got) != 0 {
		t.Errorf("web still lists %v", got)
	}
	api, err := s.ServiceRegistrationsByName(nil, structs.DefaultNamespace, "api")
	if got := regIDs(t, api, err); len(got) != 1 {
		t.Errorf("api lists %v, want 1", got)
	}
}

package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/drover-org/drover/core/events"
	"github.com/drover-org/drover/core/structs"
)

// servicesFixture registers a node, a job and two running allocs through
// entries 10-13.
func servicesFixture(t *testing.T, f *FSM) (*structs.Node, []*structs.Allocation) {
	t.Helper()
	n := mockNode()
	mustApply(t, f, 10, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
	job := registerJob(t, f, 11, mockJob("service"))
	a1, a2 := mockAlloc(job, n.ID), mockAlloc(job, n.ID)
	mustApply(t, f, 12, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{a1, a2}})
	mustApply(t, f, 13, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{
		{ID: a1.ID, ClientStatus: structs.AllocClientStatusRunning}, {ID: a2.ID, ClientStatus: structs.AllocClientStatusRunning}}})
	return n, []*structs.Allocation{a1, a2}
}

func svcReg(a *structs.Allocation, name string) *structs.ServiceRegistration {
	return &structs.ServiceRegistration{ID: "_nomad-task-" + a.ID + "-g-" + name, ServiceName: name,
		Namespace: a.Namespace, NodeID: a.NodeID, JobID: a.JobID, AllocID: a.ID, Address: "127.0.0.1", Port: 20000}
}

func serviceCount(t *testing.T, f *FSM) int {
	t.Helper()
	regs, err := f.State().ServiceRegistrations(nil, "*")
	must(t, err)
	return len(regs)
}

// Each of the four entry types applies, and none fails on content the
// state no longer matches (an unknown alloc, a missing ID, a gone node).
func TestServiceRegistrationEntries(t *testing.T) {
	f, _ := testFSM(t)
	n, allocs := servicesFixture(t, f)
	mustApply(t, f, 20, structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{
		svcReg(allocs[0], "web"), svcReg(allocs[0], "api"), svcReg(allocs[1], "web"),
		{ID: "x", ServiceName: "ghost", AllocID: "no-such-alloc"},
	}})
	if got := serviceCount(t, f); got != 3 {
		t.Fatalf("%d registrations after the upsert, want 3", got)
	}
	mustApply(t, f, 21, structs.ServiceRegistrationDeleteByIDRequestType, &structs.ServiceRegistrationDeleteByIDRequest{
		Namespace: structs.DefaultNamespace, ID: svcReg(allocs[0], "api").ID})
	mustApply(t, f, 22, structs.ServiceRegistrationDeleteByIDRequestType, &structs.ServiceRegistrationDeleteByIDRequest{ID: "missing"})
	if got := serviceCount(t, f); got != 2 {
		t.Fatalf("%d registrations after the delete by ID, want 2", got)
	}
	mustApply(t, f, 23, structs.ServiceRegistrationDeleteByAllocIDsRequestType, &structs.ServiceRegistrationDeleteByAllocIDsRequest{
		AllocIDs: []string{allocs[1].ID, "unknown"}})
	if got := serviceCount(t, f); got != 1 {
		t.Fatalf("%d registrations after the delete by allocs, want 1", got)
	}
	mustApply(t, f, 24, structs.ServiceRegistrationDeleteByNodeIDRequestType, &structs.ServiceRegistrationDeleteByNodeIDRequest{NodeID: n.ID})
	mustApply(t, f, 25, structs.ServiceRegistrationDeleteByNodeIDRequestType, &structs.ServiceRegistrationDeleteByNodeIDRequest{NodeID: "gone"})
	if got := serviceCount(t, f); got != 0 {
		t.Fatalf("%d registrations after the delete by node, want 0", got)
	}
}

// The client's terminal update, in its own entry, removes the alloc's
// registrations; a node marked down removes the node's.
func TestServiceRegistrationsEndWithAllocAndNode(t *testing.T) {
	f, _ := testFSM(t)
	n, allocs := servicesFixture(t, f)
	mustApply(t, f, 20, structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{
		svcReg(allocs[0], "web"), svcReg(allocs[1], "web")}})
	mustApply(t, f, 21, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{
		{ID: allocs[0].ID, ClientStatus: structs.AllocClientStatusComplete}}})
	if got := serviceCount(t, f); got != 1 {
		t.Fatalf("%d registrations after alloc 0 completed, want 1", got)
	}
	mustApply(t, f, 22, structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: n.ID, Status: structs.NodeStatusDown, UpdatedAt: 5})
	if got := serviceCount(t, f); got != 0 {
		t.Fatalf("%d registrations after the node went down, want 0", got)
	}
}

func TestServiceRegistrationSnapshotRoundTrip(t *testing.T) {
	src, _ := testFSM(t)
	_, allocs := servicesFixture(t, src)
	r := svcReg(allocs[0], "web")
	r.Tags = []string{"v1"}
	r.Checks = []*structs.CheckStatus{{ID: "c", Check: "http", Status: structs.CheckSuccess, Output: "ok"}}
	mustApply(t, src, 20, structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{r}})
	data := snapshotBytes(t, src)
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	got, err := dst.State().ServiceRegistrationByID(nil, r.ID)
	must(t, err)
	if got == nil || got.CreateIndex != 20 || got.ModifyIndex != 20 || got.Tags[0] != "v1" || got.Checks[0].Output != "ok" {
		t.Fatalf("restored registration = %+v", got)
	}
}

// Registrations and deregistrations are published on the Service topic.
func TestServiceRegistrationEvents(t *testing.T) {
	f, _ := testFSM(t)
	buf := events.NewBuffer(64, 0)
	defer buf.Close()
	f.SetEventBuffer(buf)
	_, allocs := servicesFixture(t, f)
	sub, err := buf.Subscribe(20, &events.Filter{Topics: map[string][]string{events.TopicService: {"*"}}})
	must(t, err)
	defer sub.Close()
	mustApply(t, f, 20, structs.ServiceRegistrationUpsertRequestType, &structs.ServiceRegistrationUpsertRequest{Services: []*structs.ServiceRegistration{svcReg(allocs[0], "web")}})
	mustApply(t, f, 21, structs.ServiceRegistrationDeleteByAllocIDsRequestType, &structs.ServiceRegistrationDeleteByAllocIDsRequest{AllocIDs: []string{allocs[0].ID}})
	for _, want := range []string{"Service/ServiceRegistration", "Service/ServiceDeregistration"} {
		b := nextBatch(t, sub)
		if got := kinds(b); got != want {
			t.Errorf("batch %d: %s, want %s", b.Index, got, want)
		}
		if p, ok := b.Events[0].Payload["Service"].(*structs.ServiceRegistration); !ok || p.ServiceName != "web" || b.Events[0].Key != "web" {
			t.Errorf("payload = %#v", b.Events[0].Payload)
		}
	}
}

package services

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

const testTimeout = 20 * time.Second

// waitFor polls cond until it holds, failing the test after testTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, testTimeout, what, cond)
}

// quickRetry is a registrar's retry wait in tests: 1ms doubling to 5ms.
func quickRetry(n int) time.Duration {
	d := time.Millisecond
	for i := 1; i < n && d < 5*time.Millisecond; i++ {
		d *= 2
	}
	return min(d, 5*time.Millisecond)
}

// fakeServer records the registrar's requests as the servers would
// apply them.
type fakeServer struct {
	mu      sync.Mutex
	updates []*structs.ServiceRegistrationNodeArgs
	// fail makes the next UpdateServices calls fail.
	fail int
}

func newFakeServer() *fakeServer { return &fakeServer{} }

func (s *fakeServer) UpdateServices(_ context.Context, args *structs.ServiceRegistrationNodeArgs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail > 0 {
		s.fail--
		return structs.NewError(structs.ErrUnavailable, "no leader")
	}
	s.updates = append(s.updates, args)
	return nil
}

func (s *fakeServer) failServiceUpdates(n int) {
	s.mu.Lock()
	s.fail = n
	s.mu.Unlock()
}

// serviceUpdates is a copy of the updates the fake server accepted.
func (s *fakeServer) serviceUpdates() []*structs.ServiceRegistrationNodeArgs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates)
}

// serviceRegs is the registrations the fake server holds, by ID.
func (s *fakeServer) serviceRegs() map[string]*structs.ServiceRegistration {
	byID := map[string]*structs.ServiceRegistration{}
	for _, u := range s.serviceUpdates() {
		for _, id := range u.DeleteAllocIDs {
			for k, r := range byID {
				if r.AllocID == id {
					delete(byID, k)
				}
			}
		}
		for _, r := range u.Upsert {
			byID[r.ID] = r
		}
	}
	return byID
}

func TestServiceRegistrarBatchesRetriesAndOrders(t *testing.T) {
	srv := newFakeServer()
	srv.failServiceUpdates(2)
	r := NewRegistrar(srv.UpdateServices, "node-1", "secret", quickRetry, hclog.NewNullLogger())
	// More than one request's worth, for two allocs.
	n := structs.MaxRegistrationsPerRequest + 10
	for i := range n {
		alloc := "a1"
		if i%2 == 1 {
			alloc = "a2"
		}
		r.upsert(&structs.ServiceRegistration{ID: fmt.Sprintf("svc-%05d", i), AllocID: alloc, ServiceName: "s"})
	}
	// a2 goes away before anything was sent: its upserts are dropped.
	r.deregisterAlloc("a2")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "everything sent", func() bool { return r.Pending() == 0 })

	ups := srv.serviceUpdates()
	if len(ups) == 0 || len(ups[0].DeleteAllocIDs) != 1 || ups[0].DeleteAllocIDs[0] != "a2" || len(ups[0].Upsert) != 0 {
		t.Fatalf("first request %+v, want the deletion of a2 alone", ups[0])
	}
	total := 0
	for _, u := range ups {
		if len(u.Upsert) > structs.MaxRegistrationsPerRequest {
			t.Errorf("request of %d upserts, over %d", len(u.Upsert), structs.MaxRegistrationsPerRequest)
		}
		if u.NodeID != "node-1" || u.SecretID != "secret" {
			t.Errorf("request for node %q/%q", u.NodeID, u.SecretID)
		}
		for _, s := range u.Upsert {
			if s.AllocID != "a1" {
				t.Errorf("upsert of %s (alloc %s) after its alloc was deregistered", s.ID, s.AllocID)
			}
		}
		total += len(u.Upsert)
	}
	if want := (n + 1) / 2; total != want {
		t.Errorf("%d upserts sent, want %d", total, want)
	}
	// A task service gone: the alloc is deleted, then its rest upserted.
	r.replaceAlloc("a1", []*structs.ServiceRegistration{{ID: "svc-keep", AllocID: "a1"}})
	waitFor(t, "replacement sent", func() bool { return r.Pending() == 0 })
	regs := srv.serviceRegs()
	if len(regs) != 1 || regs["svc-keep"] == nil {
		t.Fatalf("registrations after replace: %v, want svc-keep alone", slices.Collect(maps.Keys(regs)))
	}
}

// A registration the servers refuse for its content is dropped alone; the
// node's other registrations still go through.
func TestServiceRegistrarDropsRefused(t *testing.T) {
	srv := newFakeServer()
	send := func(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error {
		for i, r := range args.Upsert {
			if r.ServiceName == "bad" {
				return structs.NewError(structs.ErrInvalid, "Upsert[%d]: ServiceName is bad", i)
			}
		}
		return srv.UpdateServices(ctx, args)
	}
	r := NewRegistrar(send, "node-1", "secret", quickRetry, hclog.NewNullLogger())
	r.upsert(&structs.ServiceRegistration{ID: "a", AllocID: "a1", ServiceName: "good"},
		&structs.ServiceRegistration{ID: "b", AllocID: "a1", ServiceName: "bad"},
		&structs.ServiceRegistration{ID: "c", AllocID: "a2", ServiceName: "good"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "queue empty", func() bool { return r.Pending() == 0 })
	regs := srv.serviceRegs()
	if len(regs) != 2 || regs["a"] == nil || regs["c"] == nil {
		t.Fatalf("registered %v, want a and c", slices.Collect(maps.Keys(regs)))
	}
}

package state

import (
	"fmt"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// BenchmarkUpsertServiceRegistrations: the apply of one client update at
// its bound (MaxRegistrationsPerRequest: 64 allocs of 16 services), every
// registration with a new check result, and the same update unchanged.
func BenchmarkUpsertServiceRegistrations(b *testing.B) {
	s := testStore(b)
	node := mockNode()
	must(b, s.UpsertNode(10, node))
	job := storedJob(b, s, 11, mockJob("service"))
	var allocs []*structs.Allocation
	for range 64 {
		allocs = append(allocs, mockAlloc(job, node.ID))
	}
	must(b, s.UpsertAllocs(12, allocs))
	regs := make([]*structs.ServiceRegistration, 0, structs.MaxRegistrationsPerRequest)
	for _, a := range allocs {
		for i := range structs.MaxRegistrationsPerRequest / len(allocs) {
			r := reg(a, fmt.Sprintf("svc%d", i))
			r.Checks = []*structs.CheckStatus{{ID: "c", Check: "alive", Status: structs.CheckSuccess}}
			regs = append(regs, r)
		}
	}
	index := uint64(100)
	// Each entry decodes into fresh objects, as the FSM's does.
	fresh := func(ts int64) []*structs.ServiceRegistration {
		out := make([]*structs.ServiceRegistration, len(regs))
		for i, r := range regs {
			c := *r
			c.Checks = []*structs.CheckStatus{{ID: "c", Check: "alive", Status: structs.CheckSuccess, Timestamp: ts}}
			out[i] = &c
		}
		return out
	}
	b.Run("changed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			next := fresh(int64(i + 1))
			b.StartTimer()
			index++
			must(b, s.UpsertServiceRegistrations(index, next))
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			next := fresh(0)
			b.StartTimer()
			index++
			must(b, s.UpsertServiceRegistrations(index, next))
		}
	})
}

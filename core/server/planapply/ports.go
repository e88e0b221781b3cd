package planapply

import (
	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/structs"
)

// portCollision re-checks the ports of a node's plan against the latest
// state: the live allocs the plan leaves on the node and its placements
// must not hold one port twice, nor one the node reserves. A collision
// rejects the node like an over-committed one.
func portCollision(node *structs.Node, existing []*structs.Allocation, remove map[string]bool, placing []*structs.Allocation) string {
	holds := false
	for _, a := range placing {
		if a.AllocatedResources != nil && len(a.AllocatedResources.Shared.Ports) > 0 {
			holds = true
			break
		}
	}
	if !holds {
		return "" // the plan asks for no port here: nothing can collide anew
	}
	all := make([]*structs.Allocation, 0, len(existing)+len(placing))
	live := make(map[string]bool, len(existing))
	for _, a := range existing {
		live[a.ID] = true
		if !remove[a.ID] {
			all = append(all, a)
		}
	}
	all = append(all, placing...)
	return structs.PortCollision(schedio.NodeReservedPorts(node), all, func(a *structs.Allocation) bool { return !live[a.ID] })
}

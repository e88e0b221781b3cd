// Package preempt chooses the allocations of other jobs to evict so that a
// placement fits on a node, the way Nomad's schedulers preempt. It is
// shared by every engine that preempts (package nodesched for system and
// sysbatch, package countsched for service and batch).
//
// The candidates are the node's allocations of other jobs the request
// lists (ScheduleRequest nodes[].others, filled by the core only when the
// type's preemption switch is on) whose job priority is at least
// PriorityDelta below the placing job's. They are taken lowest priority
// first; within one priority, the allocation that frees the largest share
// of what is still missing (cpu, memory, disk, cores, and the static host
// ports the placement asks for that others hold) comes first, so few
// victims are needed; ties go to the newest allocation (it has done the
// least work), then to the lower ID. Once enough is freed, every victim
// whose eviction turns out unnecessary is spared again, the last picked
// (the most valuable) first: never more is preempted than needed.
package preempt

import (
	"cmp"
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// PriorityDelta is how much lower a job's priority must be for its
// allocations to be preempted: only allocs of jobs at least this many
// priority points below the placing job are candidates (Nomad's delta).
const PriorityDelta = 10

// Candidate reports whether an allocation of a job of priority other may
// be preempted by a job of priority placing.
func Candidate(placing, other int32) bool { return placing-other >= PriorityDelta }

// Need is what a placement lacks on a node.
type Need struct {
	// Capacity is the node's; Used what its allocations (and the plan so
	// far) use there; Ask what the placement asks.
	Capacity, Used, Ask feasible.Vec
	// Ports are the static host ports the placement asks for that other
	// allocations hold on the node (feasible.Ports.HeldStatic).
	Ports []int32
	// PortsFit reports whether the placement's ports fit once the given
	// host ports are freed (feasible.Ports.PickFreeing); nil when the
	// placement asks for no port.
	PortsFit func(freed []int32) bool
}

func (n Need) fits(freed feasible.Vec, freedPorts []int32) bool {
	if ok, _ := feasible.Fits(n.Capacity, n.Used.Sub(freed), n.Ask); !ok {
		return false
	}
	return n.PortsFit == nil || n.PortsFit(freedPorts)
}

// Victims chooses allocations of other jobs on node to evict so that the
// placement of need fits: its resources, and its static ports when other
// allocations hold them. skip excludes allocations the plan already
// preempts. It returns nil when no choice of candidates frees enough, or
// when the placement already fits.
func Victims(node *schedulerpb.Node, priority int32, need Need, skip func(string) bool) []*schedulerpb.NodeAlloc {
	if need.fits(feasible.Vec{}, nil) {
		return nil
	}
	var cands []*schedulerpb.NodeAlloc
	for _, o := range node.GetOthers() {
		if Candidate(priority, o.GetJobPriority()) && (skip == nil || !skip(o.GetId())) {
			cands = append(cands, o)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	slices.SortFunc(cands, func(a, b *schedulerpb.NodeAlloc) int {
		return cmp.Or(
			cmp.Compare(a.GetJobPriority(), b.GetJobPriority()),
			cmp.Compare(b.GetCreateIndex(), a.GetCreateIndex()),
			cmp.Compare(a.GetId(), b.GetId()),
		)
	})
	var (
		chosen     []*schedulerpb.NodeAlloc
		freed      feasible.Vec
		freedPorts []int32
	)
	for len(cands) > 0 && !need.fits(freed, freedPorts) {
		lack := deficit(need.Capacity, need.Used.Sub(freed), need.Ask)
		var ports []int32
		for _, v := range need.Ports {
			if !slices.Contains(freedPorts, v) {
				ports = append(ports, v)
			}
		}
		// The lowest priority left, and within it the allocation freeing
		// the largest share of the need (the first in the base order on
		// a tie).
		level := cands[0].GetJobPriority()
		best, bestShare := -1, 0.0
		for i, c := range cands {
			if c.GetJobPriority() != level {
				break
			}
			if s := share(lack, feasible.VecOf(c.GetResources())) + portShare(ports, c.GetPorts()); s > bestShare {
				best, bestShare = i, s
			}
		}
		if best < 0 {
			// Nothing at this priority frees anything still needed.
			cands = slices.DeleteFunc(cands, func(c *schedulerpb.NodeAlloc) bool { return c.GetJobPriority() == level })
			continue
		}
		c := cands[best]
		cands = slices.Delete(cands, best, best+1)
		chosen = append(chosen, c)
		freed = freed.Add(feasible.VecOf(c.GetResources()))
		freedPorts = append(freedPorts, c.GetPorts()...)
	}
	if !need.fits(freed, freedPorts) {
		return nil
	}
	// Spare the most valuable victims first (picked last) if the rest
	// already free enough.
	for i := len(chosen) - 1; i >= 0; i-- {
		rest := slices.Delete(slices.Clone(chosen), i, i+1)
		if need.fits(Freed(rest), Ports(rest)) {
			chosen = rest
		}
	}
	return chosen
}

// Ports are the host ports victims hold.
func Ports(victims []*schedulerpb.NodeAlloc) []int32 {
	var out []int32
	for _, a := range victims {
		out = append(out, a.GetPorts()...)
	}
	return out
}

// Freed is what evicting victims frees.
func Freed(victims []*schedulerpb.NodeAlloc) feasible.Vec {
	var v feasible.Vec
	for _, a := range victims {
		v = v.Add(feasible.VecOf(a.GetResources()))
	}
	return v
}

// MaxPriority is the highest job priority among victims (0 for none).
func MaxPriority(victims []*schedulerpb.NodeAlloc) int32 {
	var p int32
	for _, a := range victims {
		p = max(p, a.GetJobPriority())
	}
	return p
}

// deficit is, per dimension, how much ask exceeds what is free (0 where
// it fits), in the dimensions feasible.Fits checks.
func deficit(capacity, used, ask feasible.Vec) feasible.Vec {
	free := capacity.Sub(used)
	d := feasible.Vec{
		CPU:      max(ask.CPU-free.CPU, 0),
		MemoryMB: max(ask.MemoryMB-free.MemoryMB, 0),
		DiskMB:   max(ask.DiskMB-free.DiskMB, 0),
	}
	if ask.Cores > 0 {
		d.Cores = max(ask.Cores-free.Cores, 0)
	}
	return d
}

// portShare is the share of the needed ports an allocation holding held
// frees: 1 when it frees every one.
func portShare(needed, held []int32) float64 {
	if len(needed) == 0 {
		return 0
	}
	var n int
	for _, v := range needed {
		if slices.Contains(held, v) {
			n++
		}
	}
	return float64(n) / float64(len(needed))
}

// share is how much of need r covers: the sum over the needed dimensions
// of the covered fraction, in [0, dimensions needed].
func share(need, r feasible.Vec) float64 {
	part := func(n, v int64) float64 {
		if n <= 0 || v <= 0 {
			return 0
		}
		return float64(min(v, n)) / float64(n)
	}
	return part(need.CPU, r.CPU) + part(need.MemoryMB, r.MemoryMB) + part(need.DiskMB, r.DiskMB) + part(need.Cores, r.Cores)
}

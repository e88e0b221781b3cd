package feasible

import "github.com/drover-org/drover/sdk/proto/schedulerpb"

// Resource dimensions, the keys of AllocMetric.dimension_exhausted.
const (
	DimensionCPU    = "cpu"
	DimensionMemory = "memory"
	DimensionDisk   = "disk"
	DimensionCores  = "cores"
)

// Vec is a resource amount in Nomad's units (MHz, MB, MB, cores). It is a
// value type so that bin-packing arithmetic allocates nothing.
type Vec struct {
	CPU, MemoryMB, DiskMB, Cores int64
}

// VecOf converts a protocol Resources; nil is zero.
func VecOf(r *schedulerpb.Resources) Vec {
	if r == nil {
		return Vec{}
	}
	return Vec{CPU: r.GetCpu(), MemoryMB: r.GetMemoryMb(), DiskMB: r.GetDiskMb(), Cores: r.GetCores()}
}

// Add returns v + o.
func (v Vec) Add(o Vec) Vec {
	return Vec{v.CPU + o.CPU, v.MemoryMB + o.MemoryMB, v.DiskMB + o.DiskMB, v.Cores + o.Cores}
}

// Sub returns v - o.
func (v Vec) Sub(o Vec) Vec {
	return Vec{v.CPU - o.CPU, v.MemoryMB - o.MemoryMB, v.DiskMB - o.DiskMB, v.Cores - o.Cores}
}

// Fits reports whether ask fits in capacity given what is already used.
// When it does not, dimension names the first exhausted dimension in the
// order cpu, memory, disk, cores.
func Fits(capacity, used, ask Vec) (ok bool, dimension string) {
	free := capacity.Sub(used)
	switch {
	case ask.CPU > free.CPU:
		return false, DimensionCPU
	case ask.MemoryMB > free.MemoryMB:
		return false, DimensionMemory
	case ask.DiskMB > free.DiskMB:
		return false, DimensionDisk
	case ask.Cores > 0 && ask.Cores > free.Cores:
		return false, DimensionCores
	}
	return true, ""
}

// GroupAsk is what one allocation of tg asks of a node: the sum of its
// tasks' CPU, memory and cores, and the group's shared ephemeral disk plus
// any per-task disk.
//
// Every task is summed, lifecycle hooks included: the protocol does not say
// which prestart tasks are sidecars, and over-reserving for a short
// prestart task is the safe error.
func GroupAsk(tg *schedulerpb.TaskGroup) Vec {
	v := Vec{DiskMB: tg.GetEphemeralDiskMb()}
	for _, t := range tg.GetTasks() {
		v = v.Add(VecOf(t.GetResources()))
	}
	return v
}

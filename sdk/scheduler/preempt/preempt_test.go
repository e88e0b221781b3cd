package preempt

import (
	"slices"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

func alloc(id string, prio int32, cpu, mem int64, createIndex uint64) *schedulerpb.NodeAlloc {
	return &schedulerpb.NodeAlloc{Id: id, JobId: "j-" + id, Namespace: "default", JobPriority: prio,
		Resources: &schedulerpb.Resources{Cpu: cpu, MemoryMb: mem}, CreateIndex: createIndex}
}

func ids(as []*schedulerpb.NodeAlloc) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.GetId())
	}
	return out
}

func TestVictims(t *testing.T) {
	capacity := feasible.Vec{CPU: 4000, MemoryMB: 8192, DiskMB: 100000}
	ask := feasible.Vec{CPU: 1000, MemoryMB: 512}
	cases := []struct {
		name   string
		others []*schedulerpb.NodeAlloc
		used   feasible.Vec
		skip   []string
		want   []string
	}{
		{
			name:   "already fits: nothing preempted",
			others: []*schedulerpb.NodeAlloc{alloc("a", 10, 1000, 512, 1)},
			used:   feasible.Vec{CPU: 1000, MemoryMB: 512},
		},
		{
			name:   "priority 9 below is no candidate",
			others: []*schedulerpb.NodeAlloc{alloc("near", 41, 3500, 512, 1)},
			used:   feasible.Vec{CPU: 3500, MemoryMB: 512},
		},
		{
			name:   "priority exactly 10 below is a candidate",
			others: []*schedulerpb.NodeAlloc{alloc("ten", 40, 3500, 512, 1)},
			used:   feasible.Vec{CPU: 3500, MemoryMB: 512},
			want:   []string{"ten"},
		},
		{
			name: "lowest priority first, though a higher one alone would do",
			others: []*schedulerpb.NodeAlloc{
				alloc("p30", 30, 2000, 512, 1), alloc("p10a", 10, 400, 64, 2), alloc("p10b", 10, 500, 64, 3),
			},
			used: feasible.Vec{CPU: 3900, MemoryMB: 640},
			want: []string{"p10b", "p10a"},
		},
		{
			name: "within a priority the one freeing most first; unneeded ones spared",
			others: []*schedulerpb.NodeAlloc{
				alloc("small", 10, 100, 64, 9), alloc("big", 10, 900, 64, 1), alloc("mid", 10, 500, 64, 5),
			},
			used: feasible.Vec{CPU: 3900, MemoryMB: 192},
			want: []string{"big"},
		},
		{
			name: "a later pick that covers everything spares the earlier ones",
			others: []*schedulerpb.NodeAlloc{
				alloc("cpu", 10, 900, 0, 1), alloc("mem", 20, 0, 8000, 2), alloc("both", 20, 1000, 8000, 3),
			},
			used: feasible.Vec{CPU: 3900, MemoryMB: 8100},
			// "cpu" (priority 10) is picked first and covers the cpu
			// need; memory is still short, so "both" (priority 20, the
			// newer of the two covering it) is picked; it alone frees
			// enough, so "cpu" is spared again.
			want: []string{"both"},
		},
		{
			name:   "allocs the plan already preempts are skipped",
			others: []*schedulerpb.NodeAlloc{alloc("taken", 10, 3500, 512, 2), alloc("other", 10, 3500, 512, 1)},
			used:   feasible.Vec{CPU: 3500, MemoryMB: 512},
			skip:   []string{"taken"},
			want:   []string{"other"},
		},
		{
			name:   "not enough to free: nothing preempted",
			others: []*schedulerpb.NodeAlloc{alloc("a", 10, 200, 64, 1), alloc("peer", 45, 3000, 64, 2)},
			used:   feasible.Vec{CPU: 3900, MemoryMB: 128},
		},
		{
			name:   "equals: the newest goes first",
			others: []*schedulerpb.NodeAlloc{alloc("old", 10, 1000, 64, 1), alloc("new", 10, 1000, 64, 7)},
			used:   feasible.Vec{CPU: 3500, MemoryMB: 128},
			want:   []string{"new"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			node := &schedulerpb.Node{Id: "n", Others: c.others}
			skip := func(id string) bool { return slices.Contains(c.skip, id) }
			need := Need{Capacity: capacity, Used: c.used, Ask: ask}
			got := ids(Victims(node, 50, need, skip))
			if !slices.Equal(got, c.want) {
				t.Fatalf("victims = %v, want %v", got, c.want)
			}
			if len(got) > 0 {
				freed := Freed(Victims(node, 50, need, skip))
				if ok, dim := feasible.Fits(capacity, c.used.Sub(freed), ask); !ok {
					t.Fatalf("after preempting %v the ask still does not fit (%s)", got, dim)
				}
			}
		})
	}
}

func TestMaxPriority(t *testing.T) {
	if got := MaxPriority([]*schedulerpb.NodeAlloc{alloc("a", 10, 0, 0, 0), alloc("b", 30, 0, 0, 0)}); got != 30 {
		t.Fatalf("MaxPriority = %d, want 30", got)
	}
	if got := MaxPriority(nil); got != 0 {
		t.Fatalf("MaxPriority(nil) = %d, want 0", got)
	}
}

// A static port another alloc holds is freed by preempting its holder,
// the lowest-priority holder, and only it when resources already fit.
func TestVictimsFreePorts(t *testing.T) {
	capacity := feasible.Vec{CPU: 4000, MemoryMB: 8192}
	holder := alloc("holder", 20, 100, 64, 1)
	holder.Ports = []int32{8080}
	other := alloc("other", 10, 100, 64, 2)
	other.Ports = []int32{9090}
	near := alloc("near", 45, 100, 64, 3)
	near.Ports = []int32{8081}
	node := &schedulerpb.Node{Id: "n", Others: []*schedulerpb.NodeAlloc{holder, other, near}}
	held := map[int32]bool{8080: true, 9090: true, 8081: true}
	need := func(ports ...int32) Need {
		return Need{
			Capacity: capacity, Used: feasible.Vec{CPU: 300, MemoryMB: 192}, Ask: feasible.Vec{CPU: 100, MemoryMB: 64},
			Ports: ports,
			PortsFit: func(freed []int32) bool {
				for _, v := range ports {
					if held[v] && !slices.Contains(freed, v) {
						return false
					}
				}
				return true
			},
		}
	}
	if got := ids(Victims(node, 50, need(8080), nil)); !slices.Equal(got, []string{"holder"}) {
		t.Fatalf("victims for 8080 = %v, want [holder]", got)
	}
	if got := ids(Victims(node, 50, need(8081), nil)); got != nil {
		t.Fatalf("victims for 8081 (held by a job 5 below) = %v, want none", got)
	}
	if got := ids(Victims(node, 50, need(8080, 9090), nil)); !slices.Equal(got, []string{"other", "holder"}) {
		t.Fatalf("victims for 8080 and 9090 = %v, want [other holder]", got)
	}
}

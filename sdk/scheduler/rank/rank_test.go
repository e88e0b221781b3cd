package rank

import (
	"maps"
	"math"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func node(id, dc string, meta map[string]string) *schedulerpb.Node {
	return &schedulerpb.Node{Id: id, Datacenter: dc, Meta: meta, Attributes: map[string]string{"kernel.name": "linux"}}
}

func TestBinPack(t *testing.T) {
	cases := []struct {
		name      string
		cap, used feasible.Vec
		want      float64
	}{
		{"empty", feasible.Vec{CPU: 1000, MemoryMB: 1000}, feasible.Vec{}, 0},
		{"half", feasible.Vec{CPU: 1000, MemoryMB: 1000}, feasible.Vec{CPU: 500, MemoryMB: 500}, 0.5},
		{"cpu full memory empty", feasible.Vec{CPU: 1000, MemoryMB: 1000}, feasible.Vec{CPU: 1000}, 0.5},
		{"full", feasible.Vec{CPU: 1000, MemoryMB: 1000}, feasible.Vec{CPU: 1000, MemoryMB: 1000}, 1},
		{"zero capacity counts as full", feasible.Vec{CPU: 1000}, feasible.Vec{CPU: 250}, 0.625},
		{"over capacity clamps", feasible.Vec{CPU: 100, MemoryMB: 100}, feasible.Vec{CPU: 200, MemoryMB: 200}, 1},
	}
	for _, c := range cases {
		if got := BinPack(c.cap, c.used); !near(got, c.want) {
			t.Errorf("%s: BinPack = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAntiAffinity(t *testing.T) {
	cases := []struct {
		collisions, count int
		want              float64
	}{
		{0, 10, 0}, {1, 10, -0.2}, {4, 10, -0.5}, {20, 10, -1}, {3, 0, 0},
	}
	for _, c := range cases {
		if got := AntiAffinity(c.collisions, c.count); !near(got, c.want) {
			t.Errorf("AntiAffinity(%d, %d) = %v, want %v", c.collisions, c.count, got, c.want)
		}
	}
}

func TestAffinity(t *testing.T) {
	job := &schedulerpb.Job{Affinities: []*schedulerpb.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Weight: 50}}}
	cases := []struct {
		name  string
		group []*schedulerpb.Affinity
		task  []*schedulerpb.Affinity
		node  *schedulerpb.Node
		want  float64
	}{
		{"job affinity matches", nil, nil, node("a", "dc1", nil), 1},
		{"job affinity misses", nil, nil, node("a", "dc2", nil), 0},
		{"negative weight repels", []*schedulerpb.Affinity{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1", Weight: -50}}, nil,
			node("a", "dc1", map[string]string{"rack": "r1"}), 0},
		{"negative only", []*schedulerpb.Affinity{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1", Weight: -50}}, nil,
			node("a", "dc2", map[string]string{"rack": "r1"}), -0.5},
		{"set_contains", []*schedulerpb.Affinity{{LTarget: "${meta.tags}", Operand: "set_contains", RTarget: "ssd,gpu", Weight: 100}}, nil,
			node("a", "dc2", map[string]string{"tags": "gpu,ssd,fast"}), 100.0 / 150},
		{"set_contains misses one", []*schedulerpb.Affinity{{LTarget: "${meta.tags}", Operand: "set_contains", RTarget: "ssd,gpu", Weight: 100}}, nil,
			node("a", "dc2", map[string]string{"tags": "ssd"}), 0},
		{"task affinity counts", nil, []*schedulerpb.Affinity{{LTarget: "${attr.kernel.name}", Operand: "regexp", RTarget: "^lin", Weight: 50}},
			node("a", "dc2", nil), 0.5},
		{"zero weight ignored", []*schedulerpb.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc2", Weight: 0}}, nil,
			node("a", "dc2", nil), 0},
	}
	for _, c := range cases {
		tg := &schedulerpb.TaskGroup{Count: 1, Affinities: c.group, Tasks: []*schedulerpb.Task{{Name: "t", Affinities: c.task}}}
		g := NewGroup(job, tg, feasible.NewCache())
		if got := g.Affinity(c.node); !near(got, c.want) {
			t.Errorf("%s: Affinity = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSpread(t *testing.T) {
	dc := func(d string) *schedulerpb.Node { return node("n-"+d, d, nil) }
	targets := &schedulerpb.Spread{Attribute: "${node.datacenter}", Weight: 100, Targets: []*schedulerpb.SpreadTarget{{Value: "dc1", Percent: 70}, {Value: "dc2", Percent: 30}}}
	cases := []struct {
		name   string
		spread *schedulerpb.Spread
		count  int32
		placed []string // datacenters already holding allocs
		seen   []string // candidate datacenters
		node   *schedulerpb.Node
		want   float64
	}{
		{"target empty", targets, 10, nil, nil, dc("dc1"), (7.0 - 1) / 7},
		{"small target empty", targets, 10, nil, nil, dc("dc2"), (3.0 - 1) / 3},
		{"target reached", targets, 10, []string{"dc2", "dc2", "dc2"}, nil, dc("dc2"), (3.0 - 4) / 3},
		{"over target clamps", targets, 10, []string{"dc2", "dc2", "dc2", "dc2", "dc2", "dc2", "dc2"}, nil, dc("dc2"), -1},
		{"untargeted value without rest", targets, 10, nil, nil, dc("dc3"), -1},
		{"implicit rest", &schedulerpb.Spread{Attribute: "${node.datacenter}", Weight: 50, Targets: []*schedulerpb.SpreadTarget{{Value: "dc1", Percent: 50}}},
			10, []string{"dc2"}, nil, dc("dc3"), (5.0 - 2) / 5},
		{"attribute unset", &schedulerpb.Spread{Attribute: "${meta.rack}", Weight: 50}, 4, nil, nil, dc("dc1"), -1},
		{"even over seen values", &schedulerpb.Spread{Attribute: "${node.datacenter}", Weight: 50}, 4, []string{"dc1"}, []string{"dc1", "dc2"}, dc("dc2"), (2.0 - 1) / 2},
		{"even, fuller value", &schedulerpb.Spread{Attribute: "${node.datacenter}", Weight: 50}, 4, []string{"dc1"}, []string{"dc1", "dc2"}, dc("dc1"), 0},
	}
	for _, c := range cases {
		g := NewGroup(&schedulerpb.Job{}, &schedulerpb.TaskGroup{Count: c.count, Spreads: []*schedulerpb.Spread{c.spread}}, feasible.NewCache())
		var seen []*schedulerpb.Node
		for _, d := range c.seen {
			seen = append(seen, dc(d))
		}
		g.Observe(seen)
		for _, d := range c.placed {
			g.Add(dc(d))
		}
		if got := g.Spread(c.node); !near(got, c.want) {
			t.Errorf("%s: Spread = %v, want %v", c.name, got, c.want)
		}
	}
}

// Two spreads weigh by their share of the weights.
func TestSpreadWeights(t *testing.T) {
	tg := &schedulerpb.TaskGroup{Count: 10, Spreads: []*schedulerpb.Spread{
		{Attribute: "${node.datacenter}", Weight: 75, Targets: []*schedulerpb.SpreadTarget{{Value: "dc1", Percent: 100}}},
		{Attribute: "${meta.rack}", Weight: 25, Targets: []*schedulerpb.SpreadTarget{{Value: "r1", Percent: 100}}},
	}}
	g := NewGroup(&schedulerpb.Job{}, tg, feasible.NewCache())
	n := node("a", "dc1", map[string]string{"rack": "r2"})
	if got, want := g.Spread(n), 0.75*0.9+0.25*-1; !near(got, want) {
		t.Errorf("Spread = %v, want %v", got, want)
	}
}

func TestScoreAverages(t *testing.T) {
	capa := feasible.Vec{CPU: 1000, MemoryMB: 1000}
	half := feasible.Vec{CPU: 500, MemoryMB: 500}
	aff := []*schedulerpb.Affinity{{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1", Weight: 100}}
	cases := []struct {
		name   string
		tg     *schedulerpb.TaskGroup
		onNode int
		o      Options
		noAnti bool
		want   float64
	}{
		{"binpack alone for count 1", &schedulerpb.TaskGroup{Count: 1}, 0, Options{Capacity: capa, UsedAfter: half}, false, 0.5},
		{"anti-affinity applies from count 2", &schedulerpb.TaskGroup{Count: 4}, 1, Options{Capacity: capa, UsedAfter: half}, false, 0 /* (binpack 0.5 + anti-affinity -0.5) / 2 */},
		{"no collision still averaged", &schedulerpb.TaskGroup{Count: 4}, 0, Options{Capacity: capa, UsedAfter: half}, false, 0.25},
		{"anti-affinity off", &schedulerpb.TaskGroup{Count: 4}, 1, Options{Capacity: capa, UsedAfter: half}, true, 0.5},
		{"reschedule penalty on the old node", &schedulerpb.TaskGroup{Count: 1}, 0, Options{Capacity: capa, UsedAfter: half, Penalty: true, Penalized: true}, false, (0.5 - 1) / 2},
		{"reschedule penalty elsewhere", &schedulerpb.TaskGroup{Count: 1}, 0, Options{Capacity: capa, UsedAfter: half, Penalty: true}, false, 0.25},
		{"affinity", &schedulerpb.TaskGroup{Count: 1, Affinities: aff}, 0, Options{Capacity: capa, UsedAfter: half}, false, 0.75},
	}
	for _, c := range cases {
		g := NewGroup(&schedulerpb.Job{}, c.tg, feasible.NewCache())
		g.SetJobAntiAffinity(!c.noAnti)
		n := node("a", "dc1", nil)
		for range c.onNode {
			g.Add(n)
		}
		if got := g.Score(n, c.o); !near(got, c.want) {
			t.Errorf("%s: Score = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTop(t *testing.T) {
	top := NewTop(3)
	for i, s := range []float64{0.1, 0.9, 0.5, 0.9, 0.7, 0.2} {
		top.Offer(string(rune('a'+i)), s)
	}
	want := map[string]float64{"b.normalized-score": 0.9, "d.normalized-score": 0.9, "e.normalized-score": 0.7}
	if got := top.Scores(); !maps.Equal(got, want) {
		t.Errorf("Scores = %v, want %v", got, want)
	}
	if got := NewTop(3).Scores(); got != nil {
		t.Errorf("empty Scores = %v, want nil", got)
	}
}

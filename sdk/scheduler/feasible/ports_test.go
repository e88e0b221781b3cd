package feasible

import (
	"fmt"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func portNode(id string, lo, hi int32, used []int32, reserved ...*schedulerpb.PortRange) *schedulerpb.Node {
	return &schedulerpb.Node{Id: id, UsedPorts: used, Network: &schedulerpb.NodeNetwork{
		Ip: "10.0.0.1", MinDynamicPort: lo, MaxDynamicPort: hi, ReservedPorts: reserved}}
}

func values(ps []*schedulerpb.AllocatedPort) []int32 {
	out := make([]int32, len(ps))
	for i, p := range ps {
		out[i] = p.GetValue()
	}
	return out
}

func TestPortsPick(t *testing.T) {
	static := func(label string, v int32) *schedulerpb.PortAsk { return &schedulerpb.PortAsk{Label: label, Value: v} }
	dyn := func(label string) *schedulerpb.PortAsk { return &schedulerpb.PortAsk{Label: label} }
	tests := []struct {
		name    string
		node    *schedulerpb.Node
		ask     PortAsks
		want    string // the picked values, or the dimension
		inRange [2]int32
	}{
		{"no ask", &schedulerpb.Node{Id: "n"}, PortAsks{}, "[]", [2]int32{}},
		{"static free", portNode("n", 0, 0, nil), PortAsks{Static: []*schedulerpb.PortAsk{static("http", 8080)}}, "[8080]", [2]int32{}},
		{"static held", portNode("n", 0, 0, []int32{8080}), PortAsks{Static: []*schedulerpb.PortAsk{static("http", 8080)}},
			"network: reserved port collision http=8080", [2]int32{}},
		{"static reserved", portNode("n", 0, 0, nil, &schedulerpb.PortRange{From: 8000, To: 8100}),
			PortAsks{Static: []*schedulerpb.PortAsk{static("a", 1), static("http", 8080)}}, "network: reserved port collision http=8080", [2]int32{}},
		{"no network", &schedulerpb.Node{Id: "n"}, PortAsks{Dynamic: []*schedulerpb.PortAsk{dyn("a")}}, DimensionNoNetwork, [2]int32{}},
		{"dynamic avoids used, reserved and own picks", portNode("n", 100, 103, []int32{101}, &schedulerpb.PortRange{From: 103, To: 103}),
			PortAsks{Static: []*schedulerpb.PortAsk{static("s", 100)}, Dynamic: []*schedulerpb.PortAsk{dyn("a")}}, "[100 102]", [2]int32{}},
		{"dynamic exhausted", portNode("n", 100, 101, []int32{100}),
			PortAsks{Dynamic: []*schedulerpb.PortAsk{dyn("a"), dyn("b")}}, DimensionDynamicPorts, [2]int32{}},
		{"empty range", portNode("n", 200, 100, nil), PortAsks{Dynamic: []*schedulerpb.PortAsk{dyn("a")}}, DimensionDynamicPorts, [2]int32{}},
		{"default range", portNode("n", 0, 0, nil), PortAsks{Dynamic: []*schedulerpb.PortAsk{dyn("a"), dyn("b"), dyn("c")}}, "", [2]int32{DefaultMinDynamicPort, DefaultMaxDynamicPort}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPorts(&schedulerpb.ScheduleRequest{Eval: &schedulerpb.Evaluation{Id: "e"}})
			got, dim := p.Pick(tc.node, tc.ask, "j.g[0]")
			if tc.inRange != [2]int32{} {
				seen := map[int32]bool{}
				for _, v := range values(got) {
					if v < tc.inRange[0] || v > tc.inRange[1] || seen[v] {
						t.Fatalf("picked %v (dim %q), want distinct ports in %v", values(got), dim, tc.inRange)
					}
					seen[v] = true
				}
				if len(got) != len(tc.ask.Dynamic) {
					t.Fatalf("picked %d ports, want %d", len(got), len(tc.ask.Dynamic))
				}
				return
			}
			res := dim
			if dim == "" {
				res = fmt.Sprint(values(got))
			}
			if res != tc.want {
				t.Errorf("Pick = %s, want %s", res, tc.want)
			}
		})
	}
}

// TestPortsHoldRelease: held picks are not handed out again on the node,
// a stopped alloc's ports are, and the draws are a function of the eval,
// node and allocation.
func TestPortsHoldRelease(t *testing.T) {
	n := portNode("n", 100, 102, []int32{100})
	req := &schedulerpb.ScheduleRequest{
		Eval:   &schedulerpb.Evaluation{Id: "e"},
		Nodes:  []*schedulerpb.Node{n},
		Allocs: []*schedulerpb.Allocation{{Id: "old", NodeId: "n", Ports: []*schedulerpb.AllocatedPort{{Label: "a", Value: 100}}}},
	}
	ask := PortAsks{Dynamic: []*schedulerpb.PortAsk{{Label: "a"}}}
	p := NewPorts(req)
	if got := p.Of("old"); len(got) != 1 || got[0].GetValue() != 100 {
		t.Fatalf("Of(old) = %v, want port 100", got)
	}
	first, _ := p.Pick(n, ask, "x[0]")
	p.Hold(n, first)
	second, _ := p.Pick(n, ask, "x[1]")
	p.Hold(n, second)
	if v1, v2 := values(first), values(second); len(v1) != 1 || len(v2) != 1 || v1[0] == v2[0] || v1[0] == 100 || v2[0] == 100 {
		t.Fatalf("picks %v and %v, want 101 and 102 in some order", v1, v2)
	}
	if _, dim := p.Pick(n, ask, "x[2]"); dim != DimensionDynamicPorts {
		t.Fatalf("third pick dim = %q, want exhaustion", dim)
	}
	p.Release("old")
	p.Release("old") // twice is a no-op
	if got, dim := p.Pick(n, ask, "x[2]"); dim != "" || values(got)[0] != 100 {
		t.Fatalf("after release: %v %q, want port 100", values(got), dim)
	}

	a, _ := NewPorts(req).Pick(portNode("m", 20000, 32000, nil), ask, "x[0]")
	b, _ := NewPorts(req).Pick(portNode("m", 20000, 32000, nil), ask, "x[0]")
	c, _ := NewPorts(req).Pick(portNode("m", 20000, 32000, nil), ask, "x[1]")
	if values(a)[0] != values(b)[0] {
		t.Errorf("same request drew %v and %v", values(a), values(b))
	}
	if values(a)[0] == values(c)[0] {
		t.Errorf("two allocations drew the same port %v", values(a))
	}
}

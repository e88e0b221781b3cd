package conformance

import (
	"fmt"
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// ports says what is wrong with the ports of the plan's placements.
func (o *outcome) ports() []string {
	var out []string
	held := map[string]map[int32]int{} // node -> port -> holders after the plan's stops and preemptions
	heldOn := func(node string) map[int32]int {
		if held[node] == nil {
			held[node] = map[int32]int{}
			for _, v := range o.nodes[node].GetUsedPorts() {
				held[node][v]++
			}
			for _, a := range o.req.GetAllocs() {
				if a.GetNodeId() == node && o.stopped[a.GetId()] && live(a) {
					for _, p := range a.GetPorts() {
						held[node][p.GetValue()]--
					}
				}
			}
			// Preempted allocations of other jobs hold theirs no more.
			for _, a := range o.nodes[node].GetOthers() {
				if o.preempted[a.GetId()] {
					for _, v := range a.GetPorts() {
						held[node][v]--
					}
				}
			}
		}
		return held[node]
	}
	for _, p := range o.inPlace {
		a := o.existing[p.GetId()]
		if a == nil || p.GetClientStatus() != "" {
			continue
		}
		if !slices.EqualFunc(a.GetPorts(), p.GetPorts(), func(x, y *schedulerpb.AllocatedPort) bool {
			return x.GetValue() == y.GetValue() && x.GetLabel() == y.GetLabel()
		}) {
			out = append(out, fmt.Sprintf("in-place update %s changes its ports from %v to %v; an in-place update keeps them", p.GetId(), a.GetPorts(), p.GetPorts()))
		}
	}
	for _, p := range o.fresh {
		tg := findGroup(o.req.GetJob(), p.GetTaskGroup())
		n := o.nodes[p.GetNodeId()]
		if tg == nil || n == nil {
			continue // known-group and feasible-node say so
		}
		asked := map[string]int32{} // label -> static value (0 dynamic)
		for _, net := range tg.GetNetworks() {
			for _, a := range net.GetReservedPorts() {
				asked[a.GetLabel()] = a.GetValue()
			}
			for _, a := range net.GetDynamicPorts() {
				asked[a.GetLabel()] = 0
			}
		}
		if len(p.GetPorts()) != len(asked) {
			out = append(out, fmt.Sprintf("%s holds %d ports, its group asks for %d", p.GetId(), len(p.GetPorts()), len(asked)))
			continue
		}
		h := heldOn(p.GetNodeId())
		lo, hi := n.GetNetwork().GetMinDynamicPort(), n.GetNetwork().GetMaxDynamicPort()
		for _, port := range p.GetPorts() {
			v := port.GetValue()
			static, ok := asked[port.GetLabel()]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s holds port %q, which its group does not ask for", p.GetId(), port.GetLabel()))
			case static != 0 && v != static:
				out = append(out, fmt.Sprintf("%s holds static port %q at %d, the group asks for %d", p.GetId(), port.GetLabel(), v, static))
			case static == 0 && lo > 0 && hi > 0 && (v < lo || v > hi):
				out = append(out, fmt.Sprintf("%s holds dynamic port %q at %d, outside the node's range %d-%d", p.GetId(), port.GetLabel(), v, lo, hi))
			case h[v] > 0:
				out = append(out, fmt.Sprintf("%s holds port %d on node %s, which is already held there", p.GetId(), v, p.GetNodeId()))
			}
			for _, r := range n.GetNetwork().GetReservedPorts() {
				if v >= r.GetFrom() && v <= r.GetTo() {
					out = append(out, fmt.Sprintf("%s holds port %d, which node %s reserves", p.GetId(), v, p.GetNodeId()))
				}
			}
			h[v]++
		}
	}
	return out
}

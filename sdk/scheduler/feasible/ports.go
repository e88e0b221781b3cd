package feasible

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Port dimensions, the keys of AllocMetric.dimension_exhausted when a
// group's ports do not fit on a node, worded as Nomad's.
const (
	DimensionDynamicPorts = "network: dynamic port selection failed"
	DimensionNoNetwork    = "network: no network address on the node"

	dimensionNetworkPrefix = "network:"
)

// Nomad's dynamic port range, used when a node reports none.
const (
	DefaultMinDynamicPort = 20000
	DefaultMaxDynamicPort = 32000
)

// randomPortTries is how many random draws a dynamic port gets before the
// range is scanned in order: random picks spread ports over the range (a
// port freed a moment ago is unlikely to be handed out again at once),
// the scan finds the last free ones of a nearly full range.
const randomPortTries = 20

// DimensionPortCollision is the dimension of a static port already held
// on the node (or reserved by it).
func DimensionPortCollision(label string, port int32) string {
	return fmt.Sprintf("network: reserved port collision %s=%d", label, port)
}

// IsNetworkDimension reports whether dim is one of the port dimensions.
func IsNetworkDimension(dim string) bool { return strings.HasPrefix(dim, dimensionNetworkPrefix) }

// PortAsks are the ports one allocation of a group asks for.
type PortAsks struct {
	Static, Dynamic []*schedulerpb.PortAsk
}

// Empty reports whether the group asks for no port.
func (a PortAsks) Empty() bool { return len(a.Static) == 0 && len(a.Dynamic) == 0 }

// GroupPorts collects the ports of tg's network blocks.
func GroupPorts(tg *schedulerpb.TaskGroup) PortAsks {
	var a PortAsks
	for _, n := range tg.GetNetworks() {
		a.Static = append(a.Static, n.GetReservedPorts()...)
		a.Dynamic = append(a.Dynamic, n.GetDynamicPorts()...)
	}
	return a
}

// Ports is the port book of one scheduling attempt: for every node it
// has looked at, the host ports held there as the plan so far leaves
// them (the node's used ports, less the job's stopped allocations, plus
// this plan's picks). It is not safe for concurrent use.
type Ports struct {
	seed   string
	nodes  map[string]*nodePorts
	allocs map[string]allocPorts
	hosts  map[string]*schedulerpb.Node // nodes of allocs that hold ports
}

type allocPorts struct {
	node  string
	ports []*schedulerpb.AllocatedPort
}

type nodePorts struct {
	held map[int32]int
}

// NewPorts returns the port book of req. The job's allocations that hold
// ports (ScheduleRequest.allocs[].ports: live ones only) can be released
// by a stop and kept by an in-place update.
func NewPorts(req *schedulerpb.ScheduleRequest) *Ports {
	p := &Ports{seed: req.GetEval().GetId()}
	for _, a := range req.GetAllocs() {
		if len(a.GetPorts()) == 0 {
			continue
		}
		if p.allocs == nil {
			p.allocs = map[string]allocPorts{}
		}
		p.allocs[a.GetId()] = allocPorts{node: a.GetNodeId(), ports: a.GetPorts()}
	}
	if len(p.allocs) == 0 {
		return p
	}
	p.hosts = map[string]*schedulerpb.Node{}
	for _, a := range p.allocs {
		p.hosts[a.node] = nil
	}
	for _, n := range req.GetNodes() {
		if _, ok := p.hosts[n.GetId()]; ok {
			p.hosts[n.GetId()] = n
		}
	}
	return p
}

// node returns n's entry, indexing its used ports on first use.
func (p *Ports) node(n *schedulerpb.Node) *nodePorts {
	if np := p.nodes[n.GetId()]; np != nil {
		return np
	}
	np := &nodePorts{held: make(map[int32]int, len(n.GetUsedPorts()))}
	for _, v := range n.GetUsedPorts() {
		np.held[v]++
	}
	if p.nodes == nil {
		p.nodes = map[string]*nodePorts{}
	}
	p.nodes[n.GetId()] = np
	return np
}

// Release frees the ports of the job's allocation id (stopped by the
// plan). Releasing twice, or an allocation holding none, does nothing.
func (p *Ports) Release(id string) {
	a, ok := p.allocs[id]
	if !ok {
		return
	}
	delete(p.allocs, id)
	n := p.hosts[a.node]
	if n == nil {
		return // the node is gone: nothing is held there any more
	}
	np := p.node(n)
	for _, port := range a.ports {
		if np.held[port.GetValue()]--; np.held[port.GetValue()] <= 0 {
			delete(np.held, port.GetValue())
		}
	}
}

// Of returns copies of the ports the job's allocation id holds (an
// in-place update keeps them).
func (p *Ports) Of(id string) []*schedulerpb.AllocatedPort {
	a := p.allocs[id]
	out := make([]*schedulerpb.AllocatedPort, 0, len(a.ports))
	for _, port := range a.ports {
		out = append(out, &schedulerpb.AllocatedPort{Label: port.GetLabel(), Value: port.GetValue(), To: port.GetTo(), HostIp: port.GetHostIp()})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Pick chooses the host ports of one allocation of a group asking for ask
// on node n, without holding them (Hold does, once the placement is
// made). key names the allocation (its name) so that the dynamic ports
// drawn are a function of the eval, the node and the allocation. When
// the ports do not fit, dim names the dimension: the first static port
// already held or reserved, or the dynamic range exhausted.
func (p *Ports) Pick(n *schedulerpb.Node, ask PortAsks, key string) (ports []*schedulerpb.AllocatedPort, dim string) {
	if ask.Empty() {
		return nil, ""
	}
	net := n.GetNetwork()
	if net.GetIp() == "" {
		return nil, DimensionNoNetwork
	}
	np := p.node(n)
	reserved := net.GetReservedPorts()
	taken := func(v int32) bool {
		if np.held[v] > 0 {
			return true
		}
		for _, r := range reserved {
			if v >= r.GetFrom() && v <= r.GetTo() {
				return true
			}
		}
		for _, q := range ports {
			if q.GetValue() == v {
				return true
			}
		}
		return false
	}
	ports = make([]*schedulerpb.AllocatedPort, 0, len(ask.Static)+len(ask.Dynamic))
	for _, s := range ask.Static {
		if taken(s.GetValue()) {
			return nil, DimensionPortCollision(s.GetLabel(), s.GetValue())
		}
		ports = append(ports, &schedulerpb.AllocatedPort{Label: s.GetLabel(), Value: s.GetValue(), To: s.GetTo(), HostIp: net.GetIp()})
	}
	if len(ask.Dynamic) == 0 {
		return ports, ""
	}
	lo, hi := net.GetMinDynamicPort(), net.GetMaxDynamicPort()
	if lo <= 0 {
		lo = DefaultMinDynamicPort
	}
	if hi <= 0 {
		hi = DefaultMaxDynamicPort
	}
	if hi < lo {
		return nil, DimensionDynamicPorts
	}
	span := int(hi-lo) + 1
	rng := seededRand(p.seed, n.GetId(), key)
	for _, d := range ask.Dynamic {
		v, ok := int32(0), false
		for range randomPortTries {
			if c := lo + int32(rng.IntN(span)); !taken(c) {
				v, ok = c, true
				break
			}
		}
		if !ok {
			start := rng.IntN(span)
			for i := range span {
				if c := lo + int32((start+i)%span); !taken(c) {
					v, ok = c, true
					break
				}
			}
		}
		if !ok {
			return nil, DimensionDynamicPorts
		}
		ports = append(ports, &schedulerpb.AllocatedPort{Label: d.GetLabel(), Value: v, To: d.GetTo(), HostIp: net.GetIp()})
	}
	return ports, ""
}

// HeldStatic are the static ports of ask that allocations hold on node n
// as the plan leaves it (not those the node reserves): the ports
// preempting their holders would free.
func (p *Ports) HeldStatic(n *schedulerpb.Node, ask PortAsks) []int32 {
	if len(ask.Static) == 0 {
		return nil
	}
	np := p.node(n)
	var out []int32
	for _, s := range ask.Static {
		if np.held[s.GetValue()] > 0 {
			out = append(out, s.GetValue())
		}
	}
	return out
}

// PickFreeing is Pick as if the host ports freed (those of other jobs'
// allocations the plan would preempt) were no longer held on n.
func (p *Ports) PickFreeing(n *schedulerpb.Node, ask PortAsks, key string, freed []int32) ([]*schedulerpb.AllocatedPort, string) {
	if len(freed) == 0 || ask.Empty() {
		return p.Pick(n, ask, key)
	}
	np := p.node(n)
	var undo []int32
	for _, v := range freed {
		if np.held[v] > 0 {
			np.held[v]--
			undo = append(undo, v)
		}
	}
	defer func() {
		for _, v := range undo {
			np.held[v]++
		}
	}()
	return p.Pick(n, ask, key)
}

// Free releases host ports held on n by another job's allocation the
// plan preempts.
func (p *Ports) Free(n *schedulerpb.Node, ports []int32) {
	if len(ports) == 0 {
		return
	}
	np := p.node(n)
	for _, v := range ports {
		if np.held[v]--; np.held[v] <= 0 {
			delete(np.held, v)
		}
	}
}

// Hold records ports (from Pick) as held on node n by a placement.
func (p *Ports) Hold(n *schedulerpb.Node, ports []*schedulerpb.AllocatedPort) {
	if len(ports) == 0 {
		return
	}
	np := p.node(n)
	for _, port := range ports {
		np.held[port.GetValue()]++
	}
}

// seededRand is a generator that is a function of its keys: the same
// request always draws the same ports, and two allocations (or nodes)
// draw differently.
func seededRand(keys ...string) *rand.Rand {
	h := fnv.New64a()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

package schedio

import (
	"fmt"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// Ports between the core and the scheduler plugins: what the request
// tells of the nodes' networks and the ports held there, and the checks
// of the ports a plugin's plan hands out. (The plan applier's re-check
// against the latest state is core/server's portCollision.)

// nodeNetworkToPB is the node's network as placement reads it; nil when
// the node fingerprinted no address.
func nodeNetworkToPB(n *structs.Node) *pb.NodeNetwork {
	nr := n.NodeResources
	if nr == nil {
		return nil
	}
	var ip string
	for _, net := range nr.Networks {
		if net != nil && net.IP != "" {
			ip = net.IP
			break
		}
	}
	if ip == "" {
		return nil
	}
	out := &pb.NodeNetwork{Ip: ip, MinDynamicPort: int32(nr.MinDynamicPort), MaxDynamicPort: int32(nr.MaxDynamicPort)}
	for _, r := range NodeReservedPorts(n) {
		out.ReservedPorts = append(out.ReservedPorts, &pb.PortRange{From: int32(r.From), To: int32(r.To)})
	}
	return out
}

// NodeReservedPorts is the host ports the node keeps from scheduling. The
// client checked the list before registering; a list that does not parse
// reserves nothing rather than failing every plan for the node.
func NodeReservedPorts(n *structs.Node) []structs.PortRange {
	if n.ReservedResources == nil {
		return nil
	}
	rs, err := structs.ParsePortRanges(n.ReservedResources.Networks.ReservedHostPorts)
	if err != nil {
		return nil
	}
	return rs
}

// allocPortsToPB is the ports a live alloc holds; none once it is terminal.
func allocPortsToPB(a *structs.Allocation) []*pb.AllocatedPort {
	if a.AllocatedResources == nil || len(a.AllocatedResources.Shared.Ports) == 0 || a.TerminalStatus() {
		return nil
	}
	out := make([]*pb.AllocatedPort, 0, len(a.AllocatedResources.Shared.Ports))
	for _, p := range a.AllocatedResources.Shared.Ports {
		out = append(out, &pb.AllocatedPort{Label: p.Label, Value: int32(p.Value), To: int32(p.To), HostIp: p.HostIP})
	}
	return out
}

func networksToPB(ns []*structs.NetworkResource) []*pb.NetworkAsk {
	if len(ns) == 0 {
		return nil
	}
	out := make([]*pb.NetworkAsk, 0, len(ns))
	for _, n := range ns {
		if n == nil {
			continue
		}
		a := &pb.NetworkAsk{Mode: n.Mode}
		for _, p := range n.ReservedPorts {
			a.ReservedPorts = append(a.ReservedPorts, portAskToPB(p))
		}
		for _, p := range n.DynamicPorts {
			a.DynamicPorts = append(a.DynamicPorts, portAskToPB(p))
		}
		out = append(out, a)
	}
	return out
}

func portAskToPB(p structs.Port) *pb.PortAsk {
	return &pb.PortAsk{Label: p.Label, Value: int32(p.Value), To: int32(p.To), HostNetwork: p.HostNetwork}
}

// placedPorts turns the ports a plugin picked for a new alloc of tg into
// the alloc's shared networks and port mappings. The plugin must hand out
// exactly the group's labels, static ones at their value, every port in
// range; anything else is refused as a bad plan.
func placedPorts(tg *structs.TaskGroup, ports []*pb.AllocatedPort) ([]*structs.NetworkResource, []structs.AllocatedPortMapping, error) {
	asked := map[string]structs.Port{}
	var mode string
	for _, n := range tg.Networks {
		if n == nil {
			continue
		}
		mode = n.Mode
		for _, p := range n.ReservedPorts {
			asked[p.Label] = p
		}
		for _, p := range n.DynamicPorts {
			asked[p.Label] = p
		}
	}
	if len(ports) != len(asked) {
		return nil, nil, fmt.Errorf("group %q asks for %d ports, the plan gives %d", tg.Name, len(asked), len(ports))
	}
	if len(asked) == 0 {
		return nil, nil, nil
	}
	net := &structs.NetworkResource{Mode: mode}
	mappings := make([]structs.AllocatedPortMapping, 0, len(ports))
	given := map[string]bool{}
	for _, p := range ports {
		ask, ok := asked[p.Label]
		switch {
		case !ok || given[p.Label]:
			return nil, nil, fmt.Errorf("group %q: port %q is not asked for, or given twice", tg.Name, p.Label)
		case p.Value < structs.MinPort || p.Value > structs.MaxPort:
			return nil, nil, fmt.Errorf("group %q: port %q value %d is outside %d-%d", tg.Name, p.Label, p.Value, structs.MinPort, structs.MaxPort)
		case ask.Value != 0 && int(p.Value) != ask.Value:
			return nil, nil, fmt.Errorf("group %q: static port %q is %d, the plan gives %d", tg.Name, p.Label, ask.Value, p.Value)
		}
		given[p.Label] = true
		net.IP = p.HostIp
		port := structs.Port{Label: p.Label, Value: int(p.Value), To: ask.To, HostNetwork: ask.HostNetwork}
		if ask.Value != 0 {
			net.ReservedPorts = append(net.ReservedPorts, port)
		} else {
			net.DynamicPorts = append(net.DynamicPorts, port)
		}
		mappings = append(mappings, structs.AllocatedPortMapping{Label: p.Label, Value: int(p.Value), To: ask.To, HostIP: p.HostIp})
	}
	return []*structs.NetworkResource{net}, mappings, nil
}

package docker

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"

	"github.com/drover-org/drover/sdk/driver"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// portBindings forwards the host port of each label in the task's
// `ports` to the container: host_ip:value on the node to the port's `to`
// (the same port when unset) inside, for TCP and UDP as Nomad does. A
// label the group's network does not define is refused, naming the ones
// it does.
func portBindings(cfg *driverpb.TaskConfig, tc *TaskConfig, cc *container.Config, hc *container.HostConfig) error {
	// port_map's labels are forwarded as if `ports` listed them.
	ports := slices.Clone(tc.Ports)
	for _, pm := range tc.PortMap {
		labels := make([]string, 0, len(pm))
		for l := range pm {
			labels = append(labels, l)
		}
		slices.Sort(labels)
		for _, l := range labels {
			if !slices.Contains(ports, l) {
				ports = append(ports, l)
			}
		}
	}
	if len(ports) == 0 {
		return nil
	}
	byLabel := map[string]*driverpb.PortMapping{}
	var labels []string
	for _, p := range cfg.GetPorts() {
		byLabel[p.GetLabel()] = p
		labels = append(labels, p.GetLabel())
	}
	slices.Sort(labels)
	cc.ExposedPorts = network.PortSet{}
	hc.PortBindings = network.PortMap{}
	seen := map[string]bool{}
	for i, label := range ports {
		p := byLabel[label]
		if p == nil {
			return fmt.Errorf("%w: config: ports[%d] %q is not a port of the group's network block (it has %q)", driver.ErrInvalidConfig, i, label, labels)
		}
		if seen[label] {
			return fmt.Errorf("%w: config: ports[%d] %q is listed twice", driver.ErrInvalidConfig, i, label)
		}
		seen[label] = true
		inside := p.GetTo()
		if n, ok := tc.portMapTo(label); ok {
			inside = int32(n)
		}
		if inside <= 0 {
			inside = p.GetValue()
		}
		var hostIP netip.Addr
		if p.GetHostIp() != "" {
			a, err := netip.ParseAddr(p.GetHostIp())
			if err != nil {
				return fmt.Errorf("%w: config: ports[%d] %q: host address %q: %v", driver.ErrInvalidConfig, i, label, p.GetHostIp(), err)
			}
			hostIP = a
		}
		for _, proto := range []network.IPProtocol{network.TCP, network.UDP} {
			cp, ok := network.PortFrom(uint16(inside), proto)
			if !ok {
				continue
			}
			cc.ExposedPorts[cp] = struct{}{}
			hc.PortBindings[cp] = append(hc.PortBindings[cp], network.PortBinding{HostIP: hostIP, HostPort: strconv.Itoa(int(p.GetValue()))})
		}
	}
	return nil
}

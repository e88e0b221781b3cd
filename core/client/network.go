package client

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// fingerprintNetwork finds the address the node offers ports on and
// records it as Nomad does: NodeResources.Networks (host mode, the
// device, the address) and the unique.network.ip-address attribute, with
// the dynamic port range. An address that cannot be found leaves the node
// without a network: groups asking for ports do not go there.
func (c *Client) fingerprintNetwork(facts hostFacts) {
	procRoot := c.cfg.ProcRoot
	if procRoot == "" {
		procRoot = "/proc"
	}
	dev, ip, err := nodeAddress(c.cfg.NetworkInterface, c.cfg.LoopbackNetwork, procRoot)
	res := facts.Resources
	// The isolated modes follow the node's address (placement reads the
	// first network with an address).
	defer c.fingerprintBridge(res)
	res.MinDynamicPort, res.MaxDynamicPort = c.cfg.MinDynamicPort, c.cfg.MaxDynamicPort
	if res.MinDynamicPort == 0 {
		res.MinDynamicPort = structs.DefaultMinDynamicPort
	}
	if res.MaxDynamicPort == 0 {
		res.MaxDynamicPort = structs.DefaultMaxDynamicPort
	}
	if err != nil {
		c.logger.Warn("no network address fingerprinted: groups asking for ports will not be placed here", "error", err)
		return
	}
	bits := 32
	if ip.To4() == nil {
		bits = 128
	}
	res.Networks = []*structs.NetworkResource{{
		Mode: structs.NetworkModeHost, Device: dev, IP: ip.String(), CIDR: fmt.Sprintf("%s/%d", ip, bits),
	}}
	facts.Attributes["unique.network.ip-address"] = ip.String()
}

// nodeAddress picks the interface and address: the named interface, else
// loopback when asked (dev mode), else the default route's interface.
func nodeAddress(iface string, loopback bool, procRoot string) (string, net.IP, error) {
	switch {
	case iface != "":
	case loopback:
		iface = loopbackInterface()
	default:
		f, err := os.Open(filepath.Join(procRoot, "net/route"))
		if err != nil {
			return "", nil, fmt.Errorf("find the default route: %w", err)
		}
		iface = defaultRouteInterface(f)
		f.Close()
		if iface == "" {
			return "", nil, fmt.Errorf("no default route; set client.network_interface")
		}
	}
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return "", nil, fmt.Errorf("network_interface %q: %w", iface, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return "", nil, fmt.Errorf("network_interface %q: %w", iface, err)
	}
	ip := pickAddress(addrs)
	if ip == nil {
		return "", nil, fmt.Errorf("network_interface %q has no address", iface)
	}
	return iface, ip, nil
}

// pickAddress prefers an IPv4 address, then IPv6, skipping link-local.
func pickAddress(addrs []net.Addr) net.IP {
	var v6 net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if ipn.IP.To4() != nil {
			return ipn.IP.To4()
		}
		if v6 == nil {
			v6 = ipn.IP
		}
	}
	return v6
}

// loopbackInterface is the name of the loopback interface ("lo" on Linux).
func loopbackInterface() string {
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name
		}
	}
	return "lo"
}

// defaultRouteInterface reads /proc/net/route: the interface of the route
// to 0.0.0.0/0 with the lowest metric.
func defaultRouteInterface(r io.Reader) string {
	sc := bufio.NewScanner(r)
	best, bestMetric := "", -1
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// Iface Destination Gateway Flags RefCnt Use Metric Mask ...
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		var metric int
		if _, err := fmt.Sscan(f[6], &metric); err != nil {
			continue
		}
		if bestMetric < 0 || metric < bestMetric {
			best, bestMetric = f[0], metric
		}
	}
	return best
}

// driverPorts is the alloc's ports as drivers read them.
func driverPorts(a *structs.Allocation) []*driverpb.PortMapping {
	if a.AllocatedResources == nil || len(a.AllocatedResources.Shared.Ports) == 0 {
		return nil
	}
	out := make([]*driverpb.PortMapping, 0, len(a.AllocatedResources.Shared.Ports))
	for _, p := range a.AllocatedResources.Shared.Ports {
		out = append(out, &driverpb.PortMapping{Label: p.Label, Value: int32(p.Value), To: int32(p.To), HostIp: p.HostIP})
	}
	return out
}

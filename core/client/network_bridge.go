package client

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/client/cni"
	"github.com/drover-org/drover/core/client/taskenv"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/driverpb"
)

// BridgeConfig is the client's configuration of allocations' own network
// namespaces (network modes bridge, none and cni/<name>), Nomad's client
// keys cni_path, cni_config_dir, bridge_network_name and
// bridge_network_subnet. The zero value takes Nomad's defaults (with
// Debian's plugin directory searched after /opt/cni/bin).
type BridgeConfig struct {
	CNIPath      string
	CNIConfigDir string
	BridgeName   string
	Subnet       string
	// Disabled turns isolated network modes off: allocations asking for
	// them fail with the reason.
	Disabled bool
}

// newNetworks prepares the namespace manager, or the reason allocations
// cannot have namespaces on this node. Namespaces are pinned, and their
// CNI records kept, under <state_dir>/netns.
func newNetworks(cfg Config) (*cni.Manager, error) {
	if cfg.Bridge.Disabled {
		return nil, fmt.Errorf("isolated network modes are disabled in this client's configuration")
	}
	return cni.New(cni.Config{
		CNIPath: cfg.Bridge.CNIPath, ConfigDir: cfg.Bridge.CNIConfigDir,
		BridgeName: cfg.Bridge.BridgeName, Subnet: cfg.Bridge.Subnet,
		Dir: filepath.Join(cfg.StateDir, "netns"), Logger: cfg.Logger.Named("client"),
	})
}

// fingerprintBridge lists the isolated network modes this node serves in
// NodeResources.Networks (one entry per mode, without an address), as
// Nomad's node JSON does.
func (c *Client) fingerprintBridge(res *structs.NodeResources) {
	m := c.rcfg.Networks
	if m == nil || res == nil {
		return
	}
	for _, mode := range m.Modes() {
		res.Networks = append(res.Networks, &structs.NetworkResource{Mode: mode})
	}
}

// sweepNetworks tears down the namespaces of allocations this client no
// longer runs: those an earlier process left when it crashed, or whose
// state is gone. It runs after restore, before any new alloc starts.
func (c *Client) sweepNetworks() {
	m := c.rcfg.Networks
	if m == nil {
		return
	}
	c.mu.Lock()
	keep := make(map[string]bool, len(c.runners))
	for id := range c.runners {
		keep[id] = true
	}
	c.mu.Unlock()
	if err := m.Sweep(c.ctx, func(id string) bool { return keep[id] }); err != nil {
		c.logger.Error("failed to tear down the network of a gone allocation; retried at the next start", "error", err)
	}
}

// groupNetwork is the group's network block, nil when it has none.
func groupNetwork(tg *structs.TaskGroup) *structs.NetworkResource {
	if tg == nil || len(tg.Networks) == 0 {
		return nil
	}
	return tg.Networks[0]
}

// runNetworkSetup gives the alloc its network namespace when its group
// asks for one (bridge, none, cni/<name>), or adopts the one an earlier
// client process made. A failure fails the tasks; it reports whether
// tasks may go on.
func (ar *allocRunner) runNetworkSetup() bool {
	tg := ar.group()
	mode := tg.GroupNetworkMode()
	if !structs.IsolatedNetworkMode(mode) {
		return true
	}
	err := ar.setupNetwork(mode, groupNetwork(tg))
	if err == nil {
		ar.taskChanged() // reports the address
		return true
	}
	if ar.ctx.Err() != nil {
		return false
	}
	ar.logger.Error("network setup failed", "mode", mode, "error", err)
	for _, tr := range ar.tasks {
		tr.failBeforeStart(evSetupFailure(err))
	}
	return false
}

func (ar *allocRunner) setupNetwork(mode string, n *structs.NetworkResource) error {
	m := ar.cfg.Networks
	if m == nil {
		why := "not configured"
		if ar.cfg.NetworksErr != nil {
			why = ar.cfg.NetworksErr.Error()
		}
		return fmt.Errorf("network mode %q needs the allocation's own network namespace, which this client cannot make: %s", mode, why)
	}
	if err := m.Available(mode); err != nil {
		return fmt.Errorf("network mode %q: %w", mode, err)
	}
	req := cni.Request{AllocID: ar.id, Mode: mode}
	if n != nil && n.CNI != nil {
		req.Args = n.CNI.Args
	}
	a := ar.allocSnapshot()
	if a.AllocatedResources != nil {
		for _, p := range a.AllocatedResources.Shared.Ports {
			to := p.To
			if to <= 0 {
				to = p.Value
			}
			for _, proto := range []string{"tcp", "udp"} {
				req.Ports = append(req.Ports, cni.PortMapping{HostPort: p.Value, ContainerPort: to, Protocol: proto})
			}
		}
	}
	net, err := m.Setup(ar.ctx, req)
	if err != nil {
		return err
	}
	// No address (mode none): no status to report.
	var st *structs.AllocNetworkStatus
	if net.Status.Address != "" {
		st = &structs.AllocNetworkStatus{InterfaceName: net.Status.InterfaceName, Address: net.Status.Address}
		if d := net.Status.DNS; d != nil {
			st.DNS = &structs.DNSConfig{Servers: slices.Clone(d.Servers), Searches: slices.Clone(d.Searches), Options: slices.Clone(d.Options)}
		}
	}
	hostname := ""
	if n != nil && n.Hostname != "" {
		if hostname, err = ar.networkHostname(n.Hostname); err != nil {
			return err
		}
	}
	// The group's dns block is the allocation's resolver, over what
	// the CNI plugins returned (as in Nomad).
	var resolv string
	if n != nil && n.DNS != nil {
		if resolv, err = ar.writeResolvConf(n.DNS); err != nil {
			return err
		}
		if st != nil {
			st.DNS = &structs.DNSConfig{Servers: slices.Clone(n.DNS.Servers), Searches: slices.Clone(n.DNS.Searches), Options: slices.Clone(n.DNS.Options)}
		}
	}
	ar.mu.Lock()
	ar.netns, ar.netStatus, ar.resolvConf, ar.hostname = net.Path, st, resolv, hostname
	ar.mu.Unlock()
	return nil
}

// reportedNetStatus is the NetworkStatus the client reports for a: its
// own network's (own) once set up; none before that; an empty one for an
// alloc in the host's network, as Nomad's client reports a status for
// every alloc (its tools and tests read it as set).
func reportedNetStatus(a *structs.Allocation, own *structs.AllocNetworkStatus) *structs.AllocNetworkStatus {
	if own != nil || a == nil || a.Job == nil {
		return own
	}
	if structs.IsolatedNetworkMode(a.Job.LookupTaskGroup(a.TaskGroup).GroupNetworkMode()) {
		return nil
	}
	return &structs.AllocNetworkStatus{}
}

// networkHostname is the group network's hostname, interpolated as in
// Nomad (${NOMAD_ALLOC_INDEX}, ${node.unique.name}, ...) against the
// environment of the group's first task, and checked.
func (ar *allocRunner) networkHostname(h string) (string, error) {
	if strings.Contains(h, "${") {
		tg := ar.group()
		if len(tg.Tasks) > 0 {
			env := taskenv.Build(taskenv.Input{Node: ar.cfg.Node(), Alloc: ar.allocSnapshot(), Group: tg, Task: tg.Tasks[0], Region: ar.cfg.Region})
			h = taskenv.Interpolate(h, env.Lookup)
		}
	}
	if strings.Contains(h, "${") {
		return "", fmt.Errorf("network hostname %q: a ${…} reference could not be resolved", h)
	}
	if err := structs.ValidateNetworkHostname(h, ar.group().GroupNetworkMode()); err != nil {
		return "", fmt.Errorf("network %w", err)
	}
	return h, nil
}

// withNetworkStatus is a for the task env: with the alloc's address in
// its own namespace (NOMAD_ALLOC_IP_<label> and the like) once set up.
// A shallow copy: a itself is shared.
func (ar *allocRunner) withNetworkStatus(a *structs.Allocation) *structs.Allocation {
	ar.mu.Lock()
	st := ar.netStatus
	ar.mu.Unlock()
	if st == nil || a == nil {
		return a
	}
	c := *a
	c.NetworkStatus = st
	return &c
}

// releaseNetwork tears the alloc's namespace down once its tasks are
// dead. A failure is logged: the record stays, and the next client start
// retries the teardown.
func (ar *allocRunner) releaseNetwork() {
	m := ar.cfg.Networks
	if m == nil || !structs.IsolatedNetworkMode(ar.group().GroupNetworkMode()) {
		return
	}
	if err := m.Teardown(context.WithoutCancel(ar.ctx), ar.id); err != nil {
		ar.logger.Error("failed to tear down the allocation's network; retried at the next client start", "error", err)
		return
	}
	ar.mu.Lock()
	ar.netns = ""
	ar.mu.Unlock()
}

// networkIsolation is the namespace tasks start in; nil in host mode.
func (ar *allocRunner) networkIsolation() *driverpb.NetworkIsolation {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.netns == "" {
		return nil
	}
	ni := &driverpb.NetworkIsolation{Path: ar.netns, Hostname: ar.hostname}
	if ar.netStatus != nil {
		ni.Address = ar.netStatus.Address
	}
	return ni
}

// taskNetwork is the namespace a task starts in: nil in host mode, an
// error when the group asks for a namespace the runner has not set up (a
// task never falls back to the node's network).
func (ar *allocRunner) taskNetwork() (*driverpb.NetworkIsolation, error) {
	mode := ar.group().GroupNetworkMode()
	if !structs.IsolatedNetworkMode(mode) {
		return nil, nil
	}
	if ni := ar.networkIsolation(); ni != nil {
		return ni, nil
	}
	return nil, fmt.Errorf("network mode %q: the allocation's network namespace is not set up", mode)
}

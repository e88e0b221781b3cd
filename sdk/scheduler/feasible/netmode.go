package feasible

import (
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// ReasonMissingNetworkMode is the filter reason of a node that does not
// serve the network mode the group asks for, worded as Nomad's.
func ReasonMissingNetworkMode(mode string) string {
	return "missing network mode " + mode
}

// NetworkModeChecker filters nodes that do not serve the group's network
// mode: a mode other than host (bridge, none, cni/<name>) gives the
// allocation its own network namespace, which a node serves only when it
// lists the mode in network_modes.
type NetworkModeChecker struct{ mode string }

// NewNetworkModeChecker returns the group's checker, or nil in host mode.
func NewNetworkModeChecker(tg *schedulerpb.TaskGroup) *NetworkModeChecker {
	for _, n := range tg.GetNetworks() {
		if m := n.GetMode(); m != "" && m != "host" {
			return &NetworkModeChecker{mode: m}
		}
	}
	return nil
}

// Check implements Checker.
func (c *NetworkModeChecker) Check(n *schedulerpb.Node) (bool, string) {
	if slices.Contains(n.GetNetworkModes(), c.mode) {
		return true, ""
	}
	return false, ReasonMissingNetworkMode(c.mode)
}

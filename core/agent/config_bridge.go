package agent

import (
	"fmt"
	"path/filepath"

	"github.com/drover-org/drover/core/client"
	"github.com/drover-org/drover/core/client/cni"
)

// validateBridge checks the client's keys of allocations' own network
// namespaces: cni_path a list of absolute directories, cni_config_dir
// absolute, the bridge's name a Linux interface name and its subnet an
// IPv4 CIDR. Bounds are checked with the other keys (checkBridgeBounds).
func (c *ClientConfig) validateBridge() error {
	for _, d := range filepath.SplitList(c.CNIPath) {
		if d != "" && !filepath.IsAbs(d) {
			return fmt.Errorf("client.cni_path: %q is not an absolute path (a colon-separated list of plugin directories)", d)
		}
	}
	if c.CNIConfigDir != "" && !filepath.IsAbs(c.CNIConfigDir) {
		return fmt.Errorf("client.cni_config_dir: %q is not an absolute path", c.CNIConfigDir)
	}
	name, subnet := c.BridgeNetworkName, c.BridgeNetworkSubnet
	if name == "" {
		name = cni.DefaultBridgeName
	}
	if subnet == "" {
		subnet = cni.DefaultSubnet
	}
	if err := cni.ValidateBridge(name, subnet); err != nil {
		return fmt.Errorf("client.%v", err)
	}
	return nil
}

// checkBridgeBounds bounds the keys' lengths.
func (c *ClientConfig) checkBridgeBounds(p *problems) {
	p.str("client.cni_path", c.CNIPath, maxPath)
	p.str("client.cni_config_dir", c.CNIConfigDir, maxPath)
	p.str("client.bridge_network_name", c.BridgeNetworkName, maxName)
	p.str("client.bridge_network_subnet", c.BridgeNetworkSubnet, maxName)
}

// bridgeConfig is the client's view of the keys.
func (c *ClientConfig) bridgeConfig() client.BridgeConfig {
	return client.BridgeConfig{
		CNIPath: c.CNIPath, CNIConfigDir: c.CNIConfigDir,
		BridgeName: c.BridgeNetworkName, Subnet: c.BridgeNetworkSubnet,
	}
}

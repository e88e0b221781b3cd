package jobspec

import (
	"sort"

	"github.com/hashicorp/hcl/v2"
)

// Blocks of Nomad's jobspec that need an integration drover does not
// have. They are recognised and refused by name, with the integration
// they need, rather than reported as unknown or dropped.
var integrations = map[string]struct{ needs, instead string }{
	"vault":       {"Vault", "give the task its secrets through its env block or a template's data"},
	"consul":      {"Consul", "use provider = \"nomad\" services for discovery"},
	"identity":    {"workload identity (for Consul and Vault)", "remove the block"},
	"multiregion": {"multi-region federation", "run the job in one region"},
	"connect":     {"Consul Connect", "use provider = \"nomad\" services and reach them at their address and port"},
}

// integrationKinds are the block kinds of the named integrations, for a
// body's schema.
func integrationKinds(names ...string) []blockKind {
	out := make([]blockKind, 0, len(names))
	for _, n := range names {
		out = append(out, blockKind{name: n, many: true})
	}
	return out
}

// refuseIntegrations reports every integration block among blocks at its
// position.
func (p *parser) refuseIntegrations(blocks map[string]hcl.Blocks) {
	names := make([]string, 0, len(blocks))
	for n := range blocks {
		if _, ok := integrations[n]; ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		in := integrations[n]
		for _, b := range blocks[n] {
			p.errorf(b.DefRange, "Integration not available",
				"The %s block needs %s, and drover has no %s integration: %s.", n, in.needs, in.needs, in.instead)
		}
	}
}

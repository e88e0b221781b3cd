package node

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/structs"
)

// hostVolumeNames is the node's host volumes for `node status`, as Nomad
// prints them: their names, comma-separated, or <none>.
func hostVolumeNames(n *structs.Node) string {
	return cli.OrNone(strings.Join(slices.Sorted(maps.Keys(n.HostVolumes)), ","))
}

// hostVolumesSection is `node status -verbose`'s Host Volumes table; ""
// for a node without host volumes.
func hostVolumesSection(n *structs.Node) string {
	if len(n.HostVolumes) == 0 {
		return ""
	}
	rows := []string{"Name|ReadOnly|Source"}
	for _, name := range slices.Sorted(maps.Keys(n.HostVolumes)) {
		v := n.HostVolumes[name]
		if v == nil {
			continue
		}
		rows = append(rows, fmt.Sprintf("%s|%t|%s", name, v.ReadOnly, v.Path))
	}
	return "Host Volumes\n" + cli.FormatList(rows)
}

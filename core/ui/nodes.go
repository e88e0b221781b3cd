package ui

import (
	"cmp"
	"slices"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

type nodeRow struct {
	*structs.Node
	Allocs int
	Usage  []usage
}

type nodesData struct{ Rows []nodeRow }

// nodeUsage is what the node's live allocations use of its capacity
// (its resources less what is reserved).
func nodeUsage(n *structs.Node, allocs []*structs.Allocation) (used []usage, live int) {
	var u structs.Resources
	for _, a := range allocs {
		if a.TerminalStatus() {
			continue
		}
		live++
		r := a.AllocatedResources.Comparable()
		u.CPU += r.CPU
		u.MemoryMB += r.MemoryMB
		u.DiskMB += r.DiskMB
	}
	c := n.Capacity()
	return []usage{
		newUsage("CPU", "MHz", int64(u.CPU), int64(c.CPU)),
		newUsage("Memory", "MB", int64(u.MemoryMB), int64(c.MemoryMB)),
		newUsage("Disk", "MB", int64(u.DiskMB), int64(c.DiskMB)),
	}, live
}

// nodesPage is /ui/nodes: needs node:read.
func (u *UI) nodesPage(q *request) (*view, error) {
	if !q.allowNodeRead() {
		return nil, forbidden("Your token may not read nodes.")
	}
	nodes, err := q.st.NodeList(nil, "")
	if err != nil {
		return nil, err
	}
	d := &nodesData{}
	for _, n := range nodes {
		allocs, err := q.st.AllocsByNode(nil, n.ID)
		if err != nil {
			return nil, err
		}
		us, live := nodeUsage(n, allocs)
		d.Rows = append(d.Rows, nodeRow{Node: n, Allocs: live, Usage: us})
	}
	slices.SortFunc(d.Rows, func(a, b nodeRow) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return &view{tmpl: "nodes", title: "Nodes", data: d}, nil
}

// maxNodeAllocs is how many allocations a node page lists, the ones that
// need a look (failed, lost) first.
const maxNodeAllocs = 200

type kv struct{ Key, Value string }

type driverRow struct {
	Name string
	*structs.DriverInfo
}

type nodeData struct {
	Node       *structs.Node
	Usage      []usage
	Allocs     []*structs.Allocation
	Hidden     int
	More       int
	Attributes []kv
	Meta       []kv
	Drivers    []driverRow
	// CanWrite: the token may drain the node and change its eligibility.
	CanWrite bool
}

// nodePage is /ui/nodes/<id>: needs node:read; the node's allocations are
// shown where the token may read jobs, and the others are counted.
func (u *UI) nodePage(q *request) (*view, error) {
	if !q.allowNodeRead() {
		return nil, forbidden("Your token may not read nodes.")
	}
	n, err := q.st.NodeByID(nil, q.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, notFound("No node %s.", q.PathValue("id"))
	}
	allocs, err := q.st.AllocsByNode(nil, n.ID)
	if err != nil {
		return nil, err
	}
	d := &nodeData{Node: n, CanWrite: q.allowNodeWrite()}
	d.Usage, _ = nodeUsage(n, allocs)
	for _, a := range allocs {
		if q.allowNS(a.Namespace, acl.NamespaceCapabilityReadJob) {
			d.Allocs = append(d.Allocs, a)
		} else {
			d.Hidden++
		}
	}
	slices.SortFunc(d.Allocs, func(a, b *structs.Allocation) int {
		return cmp.Or(cmp.Compare(clientStatusRank(a.ClientStatus), clientStatusRank(b.ClientStatus)), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	if len(d.Allocs) > maxNodeAllocs {
		d.Allocs, d.More = d.Allocs[:maxNodeAllocs], len(d.Allocs)-maxNodeAllocs
	}
	for _, k := range sortedKeys(n.Attributes) {
		d.Attributes = append(d.Attributes, kv{k, n.Attributes[k]})
	}
	for _, k := range sortedKeys(n.Meta) {
		d.Meta = append(d.Meta, kv{k, n.Meta[k]})
	}
	for _, k := range sortedKeys(n.Drivers) {
		d.Drivers = append(d.Drivers, driverRow{Name: k, DriverInfo: n.Drivers[k]})
	}
	return &view{tmpl: "node", title: "Node " + n.Name, data: d}, nil
}

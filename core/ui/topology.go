package ui

import (
	"cmp"
	"slices"
)

type topoNode struct {
	ID, Name, Status string
	Eligible         bool
	Allocs           int
	CPU, Memory      usage
}

type topoDC struct {
	Name        string
	Nodes       []topoNode
	CPU, Memory usage
}

type topologyData struct {
	DCs         []topoDC
	CPU, Memory usage
	Nodes       int
	Allocs      int
}

// topologyPage is /ui/topology: every node as a box filled by the CPU
// and memory its live allocations use, by datacenter, with the totals.
// It needs node:read, as the nodes page.
func (u *UI) topologyPage(q *request) (*view, error) {
	if !q.allowNodeRead() {
		return nil, forbidden("Your token may not read nodes.")
	}
	nodes, err := q.st.NodeList(nil, "")
	if err != nil {
		return nil, err
	}
	byDC := map[string]*topoDC{}
	var totCPU, totMem, capCPU, capMem int64
	d := &topologyData{Nodes: len(nodes)}
	for _, n := range nodes {
		allocs, err := q.st.AllocsByNode(nil, n.ID)
		if err != nil {
			return nil, err
		}
		us, live := nodeUsage(n, allocs)
		tn := topoNode{ID: n.ID, Name: n.Name, Status: n.Status, Eligible: n.SchedulingEligibility == "eligible", Allocs: live, CPU: us[0], Memory: us[1]}
		dc := byDC[n.Datacenter]
		if dc == nil {
			dc = &topoDC{Name: n.Datacenter}
			byDC[n.Datacenter] = dc
		}
		dc.Nodes = append(dc.Nodes, tn)
		dc.CPU.Used += tn.CPU.Used
		dc.CPU.Total += tn.CPU.Total
		dc.Memory.Used += tn.Memory.Used
		dc.Memory.Total += tn.Memory.Total
		totCPU, capCPU = totCPU+tn.CPU.Used, capCPU+tn.CPU.Total
		totMem, capMem = totMem+tn.Memory.Used, capMem+tn.Memory.Total
		d.Allocs += live
	}
	for _, name := range sortedKeys(byDC) {
		dc := byDC[name]
		dc.CPU = newUsage("CPU", "MHz", dc.CPU.Used, dc.CPU.Total)
		dc.Memory = newUsage("Memory", "MB", dc.Memory.Used, dc.Memory.Total)
		slices.SortFunc(dc.Nodes, func(a, b topoNode) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
		d.DCs = append(d.DCs, *dc)
	}
	d.CPU = newUsage("CPU", "MHz", totCPU, capCPU)
	d.Memory = newUsage("Memory", "MB", totMem, capMem)
	return &view{tmpl: "topology", title: "Topology", data: d}, nil
}

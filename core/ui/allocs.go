package ui

import (
	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

type taskRow struct {
	Name string
	*structs.TaskState
}

type allocData struct {
	Alloc *structs.Allocation
	Tasks []taskRow
}

// allocPage is /ui/allocations/<id>: needs read-job in the allocation's
// namespace, known only once it is read.
func (u *UI) allocPage(q *request) (*view, error) {
	a, err := q.st.AllocByID(nil, q.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if a == nil {
		return nil, notFound("No allocation %s.", q.PathValue("id"))
	}
	if !q.allowNS(a.Namespace, acl.NamespaceCapabilityReadJob) {
		return nil, forbidden("Your token may not read jobs in namespace %s.", a.Namespace)
	}
	d := &allocData{Alloc: a}
	for _, k := range sortedKeys(a.TaskStates) {
		d.Tasks = append(d.Tasks, taskRow{Name: k, TaskState: a.TaskStates[k]})
	}
	return &view{tmpl: "alloc", title: "Allocation " + shortID(a.ID), data: d}, nil
}

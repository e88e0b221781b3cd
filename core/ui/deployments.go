package ui

import (
	"cmp"
	"slices"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// maxListedDeployments bounds the deployments page; the rest are counted.
const maxListedDeployments = 500

type deploymentRow struct {
	*structs.Deployment
	Groups []deploymentGroup
}

type deploymentsData struct {
	Rows   []deploymentRow
	More   int
	Active bool
}

func deploymentGroups(d *structs.Deployment) []deploymentGroup {
	var out []deploymentGroup
	for _, g := range sortedKeys(d.TaskGroups) {
		out = append(out, deploymentGroup{Name: g, DeploymentState: d.TaskGroups[g]})
	}
	return out
}

// deploymentsPage is /ui/deployments[?active=1]: the newest deployments
// of every namespace the token may read jobs in (read-job, as GET
// /v1/deployments).
func (u *UI) deploymentsPage(q *request) (*view, error) {
	allowed, err := readableNamespaces(q, acl.NamespaceCapabilityReadJob)
	if err != nil {
		return nil, err
	}
	if len(allowed) == 0 {
		return nil, forbidden("Your token may not read deployments in any namespace (it needs read-job).")
	}
	d := &deploymentsData{Active: q.URL.Query().Get("active") != ""}
	all, err := q.st.DeploymentsByIDPrefix(nil, "*", "")
	if err != nil {
		return nil, err
	}
	var list []*structs.Deployment
	for _, dep := range all {
		if allowed[dep.Namespace] && (!d.Active || dep.Active()) {
			list = append(list, dep)
		}
	}
	slices.SortFunc(list, func(a, b *structs.Deployment) int {
		return cmp.Or(cmp.Compare(b.CreateIndex, a.CreateIndex), cmp.Compare(a.ID, b.ID))
	})
	if len(list) > maxListedDeployments {
		list, d.More = list[:maxListedDeployments], len(list)-maxListedDeployments
	}
	for _, dep := range list {
		d.Rows = append(d.Rows, deploymentRow{Deployment: dep, Groups: deploymentGroups(dep)})
	}
	return &view{tmpl: "deployments", title: "Deployments", data: d}, nil
}

type deploymentData struct {
	Deployment *structs.Deployment
	Groups     []deploymentGroup
	Allocs     []*structs.Allocation
	// CanWrite says the token may promote or fail it (submit-job).
	CanWrite       bool
	NeedsPromotion bool
}

// deploymentPage is /ui/deployments/<id>: needs read-job in the
// deployment's namespace, as GET /v1/deployment/<id>.
func (u *UI) deploymentPage(q *request) (*view, error) {
	id := q.PathValue("id")
	dep, err := q.st.DeploymentByID(nil, id)
	if err != nil {
		return nil, err
	}
	if dep == nil {
		return nil, notFound("No deployment %s.", id)
	}
	if !q.allowNS(dep.Namespace, acl.NamespaceCapabilityReadJob) {
		return nil, forbidden("Your token may not read deployments in namespace %s (it needs read-job).", dep.Namespace)
	}
	d := &deploymentData{Deployment: dep, Groups: deploymentGroups(dep),
		CanWrite: q.allowNS(dep.Namespace, acl.NamespaceCapabilitySubmitJob)}
	for _, g := range d.Groups {
		if g.DesiredCanaries > 0 && !g.Promoted {
			d.NeedsPromotion = true
		}
	}
	if d.Allocs, err = q.st.AllocsByDeployment(nil, dep); err != nil {
		return nil, err
	}
	slices.SortFunc(d.Allocs, func(a, b *structs.Allocation) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return &view{tmpl: "deployment", title: "Deployment " + shortID(dep.ID), data: d}, nil
}

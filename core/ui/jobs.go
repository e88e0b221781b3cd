package ui

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// jobRow is one line of the jobs table.
type jobRow struct {
	ID, Namespace, Type, Status string
	SubmitTime                  int64
	Bar                         bar
}

type jobsData struct {
	Rows []jobRow
	// Filters as asked, and the choices the form offers.
	Status, Type, Namespace, Prefix string
	Namespaces                      []string
	Statuses, Types                 []string
	// Filtered says a filter is set, so an empty table reads "no match".
	Filtered bool
}

var (
	jobStatuses = []string{structs.JobStatusPending, structs.JobStatusRunning, structs.JobStatusDead}
)

// jobsPage is /ui/jobs?namespace=&status=&type=&prefix=. Without a
// namespace (or with "*") it lists every namespace the token may list
// jobs in; a token that may list none, or not the one asked for, gets a
// 403 page rather than an empty table.
func (u *UI) jobsPage(q *request) (*view, error) {
	qs := q.URL.Query()
	d := &jobsData{
		Status: qs.Get("status"), Type: qs.Get("type"), Namespace: qs.Get("namespace"),
		Prefix: strings.TrimSpace(qs.Get("prefix")), Statuses: jobStatuses,
	}
	if d.Namespace == "*" {
		d.Namespace = ""
	}
	d.Filtered = d.Status != "" || d.Type != "" || d.Namespace != "" || d.Prefix != ""
	nss, err := q.st.Namespaces(nil, "")
	if err != nil {
		return nil, err
	}
	allowed := map[string]bool{}
	for _, ns := range nss {
		if q.allowNS(ns.Name, acl.NamespaceCapabilityListJobs) {
			allowed[ns.Name] = true
			d.Namespaces = append(d.Namespaces, ns.Name)
		}
	}
	slices.Sort(d.Namespaces)
	switch {
	case d.Namespace != "" && !q.allowNS(d.Namespace, acl.NamespaceCapabilityListJobs):
		return nil, forbidden("Your token may not list jobs in namespace %s.", d.Namespace)
	case d.Namespace == "" && len(allowed) == 0:
		return nil, forbidden("Your token may not list jobs in any namespace.")
	}
	listNS := d.Namespace
	if listNS == "" {
		listNS = "*"
	}
	jobs, err := q.st.JobList(nil, listNS, d.Prefix)
	if err != nil {
		return nil, err
	}
	// The type choices are the types of the jobs listed (the core knows
	// no type names: any plugin's type shows up as soon as a job has it).
	types := map[string]bool{}
	if d.Type != "" {
		types[d.Type] = true
	}
	for _, j := range jobs {
		if d.Namespace == "" && !allowed[j.Namespace] {
			continue
		}
		types[j.Type] = true
		if (d.Status != "" && j.Status != d.Status) || (d.Type != "" && j.Type != d.Type) {
			continue
		}
		sum, err := q.st.JobSummaryByID(nil, j.Namespace, j.ID)
		if err != nil {
			return nil, err
		}
		d.Rows = append(d.Rows, jobRow{ID: j.ID, Namespace: j.Namespace, Type: j.Type, Status: j.Status, SubmitTime: j.SubmitTime, Bar: jobBar(sum)})
	}
	slices.SortFunc(d.Rows, func(a, b jobRow) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Namespace, b.Namespace))
	})
	d.Types = slices.Sorted(maps.Keys(types))
	return &view{tmpl: "jobs", title: "Jobs", data: d}, nil
}

type groupRow struct {
	Name  string
	Count int
	Bar   bar
}

// allocGroup is the job's allocations of one client status: the first
// maxAllocsPerStatus of them, and how many more there are.
type allocGroup struct {
	Status string
	Total  int
	Allocs []*structs.Allocation
	More   int
}

// maxAllocsPerStatus bounds a job page: a job with thousands of
// allocations still renders in milliseconds, and its bar counts them all.
const maxAllocsPerStatus = 100

// maxEvals is how many of a job's newest evaluations its page lists.
const maxEvals = 20

type evalRow struct {
	*structs.Evaluation
	// Failures are the placement failures in words, by group.
	Failures []failureRow
}

type failureRow struct{ Group, Text string }

type deploymentGroup struct {
	Name string
	*structs.DeploymentState
}

type jobData struct {
	Job         *structs.Job
	Groups      []groupRow
	AllocGroups []allocGroup
	AllocCount  int
	Versions    []*structs.Job
	Evals       []evalRow
	OlderEvals  int
	Deployment  *structs.Deployment
	DeployTGs   []deploymentGroup
	// Children are the periodic launches or dispatched instances of a
	// periodic or parameterized job, newest first.
	Children     []*structs.Job
	MoreChildren int
	// What the token may do to the job (the actions' confirmation pages
	// check again).
	CanSubmit, CanDispatch bool
}

// maxChildren is how many of a job's children its page lists.
const maxChildren = 50

// jobPage is /ui/jobs/<ns>/<id>: needs read-job in the namespace.
func (u *UI) jobPage(q *request) (*view, error) {
	ns, id := q.PathValue("ns"), q.PathValue("id")
	if !q.allowNS(ns, acl.NamespaceCapabilityReadJob) {
		return nil, forbidden("Your token may not read jobs in namespace %s.", ns)
	}
	job, err := q.st.JobByID(nil, ns, id)
	if err != nil {
		return nil, err
	}
	if job == nil {
		return nil, notFound("No job %s in namespace %s.", id, ns)
	}
	d := &jobData{Job: job}
	sum, err := q.st.JobSummaryByID(nil, ns, id)
	if err != nil {
		return nil, err
	}
	for _, tg := range job.TaskGroups {
		row := groupRow{Name: tg.Name, Count: tg.Count, Bar: newBar(nil)}
		if sum != nil {
			if s, ok := sum.Summary[tg.Name]; ok {
				row.Bar = newBar(summaryCounts(s))
			}
		}
		d.Groups = append(d.Groups, row)
	}

	allocs, err := q.st.AllocsByJob(nil, ns, id, false)
	if err != nil {
		return nil, err
	}
	d.AllocCount = len(allocs)
	byStatus := map[string][]*structs.Allocation{}
	for _, a := range allocs {
		byStatus[a.ClientStatus] = append(byStatus[a.ClientStatus], a)
	}
	for _, s := range sortedKeys(byStatus) {
		list := byStatus[s]
		slices.SortFunc(list, func(a, b *structs.Allocation) int {
			return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
		})
		g := allocGroup{Status: s, Total: len(list), Allocs: list}
		if len(list) > maxAllocsPerStatus {
			g.Allocs, g.More = list[:maxAllocsPerStatus], len(list)-maxAllocsPerStatus
		}
		d.AllocGroups = append(d.AllocGroups, g)
	}
	slices.SortStableFunc(d.AllocGroups, func(a, b allocGroup) int {
		return cmp.Compare(clientStatusRank(a.Status), clientStatusRank(b.Status))
	})

	if d.Versions, err = q.st.JobVersionsByID(nil, ns, id); err != nil {
		return nil, err
	}
	evals, err := q.st.EvalsByJob(nil, ns, id)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(evals, func(a, b *structs.Evaluation) int { return cmp.Compare(b.CreateIndex, a.CreateIndex) })
	if len(evals) > maxEvals {
		evals, d.OlderEvals = evals[:maxEvals], len(evals)-maxEvals
	}
	for _, e := range evals {
		d.Evals = append(d.Evals, newEvalRow(e))
	}
	d.CanSubmit = q.allowNS(ns, acl.NamespaceCapabilitySubmitJob)
	d.CanDispatch = q.allowNS(ns, acl.NamespaceCapabilityDispatchJob)
	if job.IsPeriodic() || job.IsParameterized() {
		if d.Children, err = q.st.JobsByParent(nil, ns, id); err != nil {
			return nil, err
		}
		slices.SortFunc(d.Children, func(a, b *structs.Job) int {
			return cmp.Or(cmp.Compare(b.SubmitTime, a.SubmitTime), cmp.Compare(b.ID, a.ID))
		})
		if len(d.Children) > maxChildren {
			d.Children, d.MoreChildren = d.Children[:maxChildren], len(d.Children)-maxChildren
		}
	}
	if d.Deployment, err = q.st.LatestDeploymentByJob(nil, ns, id); err != nil {
		return nil, err
	}
	if d.Deployment != nil {
		for _, g := range sortedKeys(d.Deployment.TaskGroups) {
			d.DeployTGs = append(d.DeployTGs, deploymentGroup{Name: g, DeploymentState: d.Deployment.TaskGroups[g]})
		}
	}
	return &view{tmpl: "job", title: "Job " + job.ID, data: d}, nil
}

// clientStatusRank orders allocation lists: the ones that need a look
// first, then running, then finished.
func clientStatusRank(s string) int {
	switch s {
	case structs.AllocClientStatusFailed:
		return 0
	case structs.AllocClientStatusLost, structs.AllocClientStatusUnknown:
		return 1
	case structs.AllocClientStatusPending:
		return 2
	case structs.AllocClientStatusRunning:
		return 3
	default:
		return 4
	}
}

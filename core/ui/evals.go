package ui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// maxListedEvals bounds the evaluations page; the rest are counted.
const maxListedEvals = 500

type evalsData struct {
	Rows     []evalRow
	More     int
	Status   string
	Prefix   string
	Filtered bool
}

// readableNamespaces lists the namespaces in which the caller has
// capability, and whether it has it in any; with ACLs off every one.
func readableNamespaces(q *request, capability string) (map[string]bool, error) {
	nss, err := q.st.Namespaces(nil, "")
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, ns := range nss {
		if q.allowNS(ns.Name, capability) {
			out[ns.Name] = true
		}
	}
	return out, nil
}

// evalsPage is /ui/evaluations?status=&prefix=: the newest evaluations of
// every namespace the token may read jobs in (read-job, as GET
// /v1/evaluations), with their placement failures in words.
func (u *UI) evalsPage(q *request) (*view, error) {
	allowed, err := readableNamespaces(q, acl.NamespaceCapabilityReadJob)
	if err != nil {
		return nil, err
	}
	if len(allowed) == 0 {
		return nil, forbidden("Your token may not read evaluations in any namespace (it needs read-job).")
	}
	qs := q.URL.Query()
	d := &evalsData{Status: qs.Get("status"), Prefix: strings.TrimSpace(qs.Get("prefix"))}
	d.Filtered = d.Status != "" || d.Prefix != ""
	evals, err := q.st.Evals(nil)
	if err != nil {
		return nil, err
	}
	var list []*structs.Evaluation
	for _, e := range evals {
		if !allowed[e.Namespace] || d.Status != "" && e.Status != d.Status ||
			d.Prefix != "" && !strings.HasPrefix(e.ID, d.Prefix) && !strings.HasPrefix(e.JobID, d.Prefix) {
			continue
		}
		list = append(list, e)
	}
	slices.SortFunc(list, func(a, b *structs.Evaluation) int {
		return cmp.Or(cmp.Compare(b.CreateIndex, a.CreateIndex), cmp.Compare(a.ID, b.ID))
	})
	if len(list) > maxListedEvals {
		list, d.More = list[:maxListedEvals], len(list)-maxListedEvals
	}
	for _, e := range list {
		d.Rows = append(d.Rows, newEvalRow(e))
	}
	return &view{tmpl: "evals", title: "Evaluations", data: d}, nil
}

func newEvalRow(e *structs.Evaluation) evalRow {
	row := evalRow{Evaluation: e}
	for _, g := range sortedKeys(e.FailedTGAllocs) {
		row.Failures = append(row.Failures, failureRow{Group: g, Text: explainFailure(e.FailedTGAllocs[g])})
	}
	return row
}

// failureDetail is one group's placement failure on the evaluation page:
// the sentence, then each count the scheduler kept.
type failureDetail struct {
	Group   string
	Summary string
	Facts   []string
}

func detailFailure(group string, m *structs.AllocMetric) failureDetail {
	d := failureDetail{Group: group, Summary: explainFailure(m)}
	if m == nil {
		return d
	}
	d.Facts = append(d.Facts, fmt.Sprintf("%s evaluated", plural(m.NodesEvaluated, "node was", "nodes were")))
	if m.NodesFiltered > 0 {
		d.Facts = append(d.Facts, fmt.Sprintf("%s filtered out by constraints or class", plural(m.NodesFiltered, "node was", "nodes were")))
	}
	if m.NodesExhausted > 0 {
		d.Facts = append(d.Facts, fmt.Sprintf("%s too full (resources exhausted)", plural(m.NodesExhausted, "node was", "nodes were")))
	}
	for _, dc := range sortedKeys(m.NodesAvailable) {
		d.Facts = append(d.Facts, fmt.Sprintf("datacenter %s: %s available", dc, plural(m.NodesAvailable[dc], "node", "nodes")))
	}
	for _, dim := range sortedKeys(m.DimensionExhausted) {
		d.Facts = append(d.Facts, fmt.Sprintf("dimension %q exhausted on %s", dim, plural(m.DimensionExhausted[dim], "node", "nodes")))
	}
	for _, c := range sortedKeys(m.ConstraintFiltered) {
		d.Facts = append(d.Facts, fmt.Sprintf("constraint %q filtered %s", c, plural(m.ConstraintFiltered[c], "node", "nodes")))
	}
	return d
}

type evalData struct {
	Eval     *structs.Evaluation
	Failures []failureDetail
	Queued   []kv
	Allocs   []*structs.Allocation
}

// evalPage is /ui/evaluations/<id>: needs read-job in the evaluation's
// namespace, as GET /v1/evaluation/<id>.
func (u *UI) evalPage(q *request) (*view, error) {
	id := q.PathValue("id")
	e, err := q.st.EvalByID(nil, id)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, notFound("No evaluation %s.", id)
	}
	if !q.allowNS(e.Namespace, acl.NamespaceCapabilityReadJob) {
		return nil, forbidden("Your token may not read evaluations in namespace %s (it needs read-job).", e.Namespace)
	}
	d := &evalData{Eval: e}
	for _, g := range sortedKeys(e.FailedTGAllocs) {
		d.Failures = append(d.Failures, detailFailure(g, e.FailedTGAllocs[g]))
	}
	for _, g := range sortedKeys(e.QueuedAllocations) {
		if n := e.QueuedAllocations[g]; n > 0 {
			d.Queued = append(d.Queued, kv{g, fmt.Sprint(n)})
		}
	}
	if d.Allocs, err = q.st.AllocsByEval(nil, e.ID); err != nil {
		return nil, err
	}
	slices.SortFunc(d.Allocs, func(a, b *structs.Allocation) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return &view{tmpl: "eval", title: "Evaluation " + shortID(e.ID), data: d}, nil
}

package ui

import (
	"fmt"
	"html"
	"html/template"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/core/structs"
)

var funcs = template.FuncMap{
	"jobURL":        jobURL,
	"allocURL":      func(id string) string { return "/ui/allocations/" + url.PathEscape(id) },
	"nodeURL":       func(id string) string { return "/ui/nodes/" + url.PathEscape(id) },
	"short":         shortID,
	"nanotime":      nanoTime,
	"time":          goTime,
	"isoNano":       func(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339) },
	"isoTime":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"evalURL":       evalURL,
	"deploymentURL": deploymentURL,
	"volumeURL":     func(ns, id string) string { return "/ui/volumes/" + url.PathEscape(ns) + "/" + url.PathEscape(id) },
	"csiPluginURL":  func(id string) string { return "/ui/plugins/csi/" + url.PathEscape(id) },
	"actionURL":     actionURL,
	"plural":        plural,
	"nodeActionURL": func(action, id string) string {
		return "/ui/actions/" + action + "?" + url.Values{"node": {id}}.Encode()
	},
	"csrfField": func() string { return csrfField },
	"logTypes":  func() []string { return []string{"stdout", "stderr"} },
	"healthy":   healthyOf,
	"evalStatuses": func() []string {
		return []string{structs.EvalStatusPending, structs.EvalStatusBlocked, structs.EvalStatusComplete, structs.EvalStatusFailed, structs.EvalStatusCancelled}
	},
	"logsURL": func(alloc, task, typ string) string {
		return "/ui/allocations/" + url.PathEscape(alloc) + "/logs?" + url.Values{"task": {task}, "type": {typ}}.Encode()
	},
}

// healthyOf words healthy plugin instances of those expected; with no
// job declaring a count, only the healthy ones are known.
func healthyOf(healthy, expected int) string {
	if expected == 0 {
		return fmt.Sprintf("%d healthy", healthy)
	}
	return fmt.Sprintf("%d of %d healthy", healthy, expected)
}

func evalURL(id string) string       { return "/ui/evaluations/" + url.PathEscape(id) }
func deploymentURL(id string) string { return "/ui/deployments/" + url.PathEscape(id) }

// actionURL is an action's confirmation page for a job (ns, id) or, with
// ns empty, a deployment (id).
func actionURL(action, ns, id string) string {
	v := url.Values{}
	if ns == "" {
		v.Set("deployment", id)
	} else {
		v.Set("namespace", ns)
		v.Set("job", id)
	}
	return "/ui/actions/" + action + "?" + v.Encode()
}

// jobURL is a job page's path. A job ID may hold slashes (periodic and
// dispatched children), which stay path separators; every other byte is
// escaped per segment.
func jobURL(ns, id string) string {
	segs := strings.Split(id, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/ui/jobs/" + url.PathEscape(ns) + "/" + strings.Join(segs, "/")
}

// shortID is the first 8 characters of an ID, as the CLI shows it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func nanoTime(ns int64) string {
	if ns == 0 {
		return "—"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05 UTC")
}

func goTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// segment is one status's share of a summary bar.
type segment struct {
	Status string
	N      int
	Width  int // percent, for the w<N> class
}

// bar is a stacked bar of allocations by status, with its words: the bar
// is drawn for the eye and Label says the same for everyone else.
type bar struct {
	Segments []segment
	Total    int
	Label    string
}

// HTML draws the bar. It is written here rather than in a template: the
// jobs page draws one per job, and each value a template prints costs a
// call through reflection to its escaper, which made the bars the most of
// the page's render time. Every text is HTML-escaped; the widths and
// counts are numbers.
func (b bar) HTML() template.HTML {
	var sb strings.Builder
	label := html.EscapeString(b.Label)
	sb.WriteString(`<div class="bar" role="img" aria-label="`)
	sb.WriteString(label)
	sb.WriteString(`">`)
	for _, s := range b.Segments {
		st := html.EscapeString(s.Status)
		fmt.Fprintf(&sb, `<span class="seg %s w%d" title="%d %s"></span>`, st, s.Width, s.N, st)
	}
	sb.WriteString(`</div><span class="barlabel">`)
	sb.WriteString(label)
	sb.WriteString(`</span>`)
	return template.HTML(sb.String()) // every text above is escaped
}

// statusOrder is how summary bars and allocation lists order statuses.
var statusOrder = []string{"queued", "starting", "running", "complete", "failed", "lost", "unknown"}

func newBar(counts map[string]int) bar {
	b := bar{}
	for _, s := range statusOrder {
		b.Total += counts[s]
	}
	var words []string
	for _, s := range statusOrder {
		n := counts[s]
		if n == 0 {
			continue
		}
		w := n * 100 / max(b.Total, 1)
		b.Segments = append(b.Segments, segment{Status: s, N: n, Width: max(w, 1)})
		words = append(words, fmt.Sprintf("%d %s", n, s))
	}
	if len(words) == 0 {
		b.Label = "no allocations"
	} else {
		b.Label = strings.Join(words, ", ")
	}
	return b
}

func summaryCounts(s structs.TaskGroupSummary) map[string]int {
	return map[string]int{
		"queued": s.Queued, "starting": s.Starting, "running": s.Running, "complete": s.Complete,
		"failed": s.Failed, "lost": s.Lost, "unknown": s.Unknown,
	}
}

// jobBar sums a job's groups.
func jobBar(sum *structs.JobSummary) bar {
	total := map[string]int{}
	if sum != nil {
		for _, g := range sum.Summary {
			for k, v := range summaryCounts(g) {
				total[k] += v
			}
		}
	}
	return newBar(total)
}

// usage is one resource of a node: used of total, as a bar.
type usage struct {
	Name    string
	Used    int64
	Total   int64
	Unit    string
	Percent int
}

func newUsage(name, unit string, used, total int64) usage {
	p := 0
	if total > 0 {
		p = int(min(used*100/total, 100))
	}
	return usage{Name: name, Unit: unit, Used: used, Total: total, Percent: p}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// explainFailure says in words why a group's allocations could not be
// placed, from the metrics the scheduler recorded: "2 allocations could
// not be placed: memory exhausted on 3 nodes; constraint … filtered 5
// nodes". Reasons are sorted so that the sentence is stable.
func explainFailure(m *structs.AllocMetric) string {
	if m == nil {
		return ""
	}
	head := plural(1+m.CoalescedFailures, "allocation", "allocations") + " could not be placed"
	var why []string
	if m.NodePool != "" && m.NodesInPool == 0 {
		why = append(why, fmt.Sprintf("node pool %s has no nodes", m.NodePool))
	}
	if m.NodesEvaluated == 0 {
		why = append(why, "no nodes were eligible for evaluation")
	}
	for _, dc := range sortedKeys(m.NodesAvailable) {
		if m.NodesAvailable[dc] == 0 {
			why = append(why, fmt.Sprintf("no nodes are available in datacenter %s", dc))
		}
	}
	for _, dim := range sortedKeys(m.DimensionExhausted) {
		why = append(why, fmt.Sprintf("%s exhausted on %s", dim, plural(m.DimensionExhausted[dim], "node", "nodes")))
	}
	if m.NodesExhausted > 0 && len(m.DimensionExhausted) == 0 {
		why = append(why, fmt.Sprintf("resources exhausted on %s", plural(m.NodesExhausted, "node", "nodes")))
	}
	for _, c := range sortedKeys(m.ConstraintFiltered) {
		why = append(why, fmt.Sprintf("constraint %s filtered %s", c, plural(m.ConstraintFiltered[c], "node", "nodes")))
	}
	for _, c := range sortedKeys(m.ClassFiltered) {
		why = append(why, fmt.Sprintf("node class %s filtered %s", c, plural(m.ClassFiltered[c], "node", "nodes")))
	}
	for _, c := range sortedKeys(m.ClassExhausted) {
		why = append(why, fmt.Sprintf("node class %s exhausted on %s", c, plural(m.ClassExhausted[c], "node", "nodes")))
	}
	for _, q := range m.QuotaExhausted {
		why = append(why, fmt.Sprintf("quota %s reached", q))
	}
	if len(why) == 0 {
		return head
	}
	return head + ": " + strings.Join(why, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

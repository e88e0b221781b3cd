package feasible

import (
	"fmt"
	"strconv"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Filter reason of a node that already runs an allocation the
// distinct_hosts constraint keeps apart from the one being placed.
const FilterDistinctHosts = "distinct_hosts"

// Distinct enforces the distinct_hosts and distinct_property constraints of
// a count-placed job, which depend on where the plan puts the job's other
// allocations: a checker alone cannot see them. At job level a constraint
// counts every allocation of the job; at group (or task) level, those of
// the group. distinct_property's right side is the most allocations that
// may share one value of the property (1 when empty).
//
// Record every allocation the plan keeps or places with Add, then Check a
// node for a group's next allocation.
type Distinct struct {
	job    []distinctRule
	groups map[string][]distinctRule
	// onNode counts allocations per node, by group ("" for the job).
	onNode map[string]map[string]int
}

type distinctRule struct {
	hosts bool
	prop  Target
	key   string // the property as written, for reasons
	limit int
	// used counts allocations per property value.
	used map[string]int
}

// NewDistinct compiles the distinct constraints of job; nil when it has
// none, and a nil *Distinct allows everything.
func NewDistinct(job *schedulerpb.Job) *Distinct {
	d := &Distinct{groups: map[string][]distinctRule{}, onNode: map[string]map[string]int{}}
	has := false
	d.job = distinctRules(job.GetConstraints())
	has = len(d.job) > 0
	for _, tg := range job.GetTaskGroups() {
		cs := append([]*schedulerpb.Constraint(nil), tg.GetConstraints()...)
		for _, t := range tg.GetTasks() {
			cs = append(cs, t.GetConstraints()...)
		}
		if rs := distinctRules(cs); len(rs) > 0 {
			d.groups[tg.GetName()] = rs
			has = true
		}
	}
	if !has {
		return nil
	}
	return d
}

func distinctRules(cs []*schedulerpb.Constraint) []distinctRule {
	var out []distinctRule
	for _, c := range cs {
		switch c.GetOperand() {
		case OpDistinctHosts:
			if c.GetRTarget() == "false" || c.GetLTarget() == "false" {
				continue
			}
			out = append(out, distinctRule{hosts: true})
		case OpDistinctProperty:
			limit := 1
			if n, err := strconv.Atoi(c.GetRTarget()); err == nil && n > 0 {
				limit = n
			}
			out = append(out, distinctRule{prop: ParseTarget(c.GetLTarget()), key: c.GetLTarget(), limit: limit, used: map[string]int{}})
		}
	}
	return out
}

// Add records an allocation of group on n.
func (d *Distinct) Add(group string, n *schedulerpb.Node) {
	if d == nil {
		return
	}
	m := d.onNode[n.GetId()]
	if m == nil {
		m = map[string]int{}
		d.onNode[n.GetId()] = m
	}
	m[""]++
	m[group]++
	for _, rs := range [][]distinctRule{d.job, d.groups[group]} {
		for _, r := range rs {
			if r.hosts {
				continue
			}
			if v, ok := r.prop.Resolve(n); ok {
				r.used[v]++
			}
		}
	}
}

// Check reports whether n may take the next allocation of group, and the
// filter reason when not. A node without the property fails a
// distinct_property constraint, as in Nomad.
func (d *Distinct) Check(group string, n *schedulerpb.Node) (bool, string) {
	if d == nil {
		return true, ""
	}
	for i, rs := range [][]distinctRule{d.job, d.groups[group]} {
		scope := ""
		if i == 1 {
			scope = group
		}
		for _, r := range rs {
			if r.hosts {
				if d.onNode[n.GetId()][scope] > 0 {
					return false, FilterDistinctHosts
				}
				continue
			}
			v, ok := r.prop.Resolve(n)
			if !ok {
				return false, fmt.Sprintf("missing property %q", r.key)
			}
			if u := r.used[v]; u >= r.limit {
				return false, fmt.Sprintf("distinct_property: %s=%s used by %d allocs", r.key, v, u)
			}
		}
	}
	return true, ""
}

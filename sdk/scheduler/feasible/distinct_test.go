package feasible

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func TestDistinct(t *testing.T) {
	rack := func(id, r string) *schedulerpb.Node {
		n := &schedulerpb.Node{Id: id}
		if r != "" {
			n.Meta = map[string]string{"rack": r}
		}
		return n
	}
	hosts := &schedulerpb.Constraint{Operand: OpDistinctHosts, RTarget: "true"}
	prop := func(limit string) *schedulerpb.Constraint {
		return &schedulerpb.Constraint{LTarget: "${meta.rack}", Operand: OpDistinctProperty, RTarget: limit}
	}
	type placed struct{ group, node, rack string }
	cases := []struct {
		name       string
		job, group []*schedulerpb.Constraint
		placed     []placed
		group2     string // group checked
		node       *schedulerpb.Node
		ok         bool
		reason     string
	}{
		{"no constraint", nil, nil, []placed{{"a", "n1", ""}}, "a", rack("n1", ""), true, ""},
		{"job distinct_hosts across groups", []*schedulerpb.Constraint{hosts}, nil, []placed{{"b", "n1", ""}}, "a", rack("n1", ""), false, FilterDistinctHosts},
		{"job distinct_hosts other node", []*schedulerpb.Constraint{hosts}, nil, []placed{{"b", "n1", ""}}, "a", rack("n2", ""), true, ""},
		{"group distinct_hosts ignores other groups", nil, []*schedulerpb.Constraint{hosts}, []placed{{"b", "n1", ""}}, "a", rack("n1", ""), true, ""},
		{"group distinct_hosts same group", nil, []*schedulerpb.Constraint{hosts}, []placed{{"a", "n1", ""}}, "a", rack("n1", ""), false, FilterDistinctHosts},
		{"distinct_hosts false is off", nil, []*schedulerpb.Constraint{{Operand: OpDistinctHosts, RTarget: "false"}}, []placed{{"a", "n1", ""}}, "a", rack("n1", ""), true, ""},
		{"distinct_property default limit 1", nil, []*schedulerpb.Constraint{prop("")}, []placed{{"a", "n1", "r1"}}, "a", rack("n2", "r1"), false, "distinct_property: ${meta.rack}=r1 used by 1 allocs"},
		{"distinct_property other value", nil, []*schedulerpb.Constraint{prop("")}, []placed{{"a", "n1", "r1"}}, "a", rack("n2", "r2"), true, ""},
		{"distinct_property limit 2", nil, []*schedulerpb.Constraint{prop("2")}, []placed{{"a", "n1", "r1"}}, "a", rack("n2", "r1"), true, ""},
		{"distinct_property missing", nil, []*schedulerpb.Constraint{prop("")}, nil, "a", rack("n2", ""), false, `missing property "${meta.rack}"`},
		{"job distinct_property across groups", []*schedulerpb.Constraint{prop("")}, nil, []placed{{"b", "n1", "r1"}}, "a", rack("n2", "r1"), false, "distinct_property: ${meta.rack}=r1 used by 1 allocs"},
	}
	for _, c := range cases {
		job := &schedulerpb.Job{Constraints: c.job, TaskGroups: []*schedulerpb.TaskGroup{
			{Name: "a", Constraints: c.group}, {Name: "b"},
		}}
		d := NewDistinct(job)
		for _, p := range c.placed {
			d.Add(p.group, rack(p.node, p.rack))
		}
		ok, reason := d.Check(c.group2, c.node)
		if ok != c.ok || reason != c.reason {
			t.Errorf("%s: Check = %v %q, want %v %q", c.name, ok, reason, c.ok, c.reason)
		}
	}
}

package structs

import "fmt"

// The rules of affinity and spread blocks, as Nomad holds them: what the
// scheduler scores by must be meaningful before it is written to Raft.

// validateAffinities checks each affinity of a list (what names the list
// in errors, e.g. `group "web": affinity`); null elements are refused.
func validateAffinities(l *errList, what string, list []*Affinity) {
	for i, a := range list {
		where := fmt.Sprintf("%s %d", what, i+1)
		if a == nil {
			l.add("%s: null is not allowed", where)
			continue
		}
		switch {
		case a.Weight == 0:
			l.add("%s: weight must not be zero", where)
		case a.Weight < -100 || a.Weight > 100:
			l.add("%s: weight %d must be between -100 and 100", where, a.Weight)
		}
		switch a.Operand {
		case "distinct_hosts", "distinct_property":
			l.add("%s: operator %q is a constraint, not an affinity", where, a.Operand)
			continue
		}
		validateConstraint(l, where, &Constraint{LTarget: a.LTarget, RTarget: a.RTarget, Operand: a.Operand})
	}
}

// validateSpreadRules checks each non-null spread of a list: an attribute,
// a weight in [0, 100], target percentages that sum to at most 100 and
// name each value once.
func validateSpreadRules(l *errList, where string, spreads []*Spread) {
	for i, sp := range spreads {
		if sp == nil {
			continue
		}
		at := fmt.Sprintf("%s spread %d", where, i+1)
		if sp.Attribute == "" {
			l.add("%s: attribute is required", at)
		}
		if sp.Weight < 0 || sp.Weight > 100 {
			l.add("%s: weight %d must be between 0 and 100", at, sp.Weight)
		}
		sum := 0
		seen := map[string]bool{}
		for _, t := range sp.SpreadTarget {
			if t == nil {
				continue
			}
			if seen[t.Value] {
				l.add("%s: target %q is listed more than once", at, t.Value)
			}
			seen[t.Value] = true
			sum += int(t.Percent)
		}
		if sum > 100 {
			l.add("%s: target percentages sum to %d%%, more than 100%%", at, sum)
		}
	}
}

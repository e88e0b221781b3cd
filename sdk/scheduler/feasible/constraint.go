package feasible

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Constraint operands (§1.2 of the behaviour reference).
const (
	OpEqual          = "="
	OpEqualEqual     = "=="
	OpIs             = "is"
	OpNotEqual       = "!="
	OpNot            = "not"
	OpLess           = "<"
	OpLessEqual      = "<="
	OpGreater        = ">"
	OpGreaterEqual   = ">="
	OpRegexp         = "regexp"
	OpVersion        = "version"
	OpSemver         = "semver"
	OpSetContains    = "set_contains"
	OpSetContainsAll = "set_contains_all"
	OpSetContainsAny = "set_contains_any"
	OpIsSet          = "is_set"
	OpIsNotSet       = "is_not_set"
	// OpDistinctHosts and OpDistinctProperty spread allocations of one job.
	// The system and sysbatch schedulers place one allocation name per node,
	// so both are satisfied by construction and always pass here.
	OpDistinctHosts    = "distinct_hosts"
	OpDistinctProperty = "distinct_property"
)

// Cache holds compiled regular expressions and version constraints for one
// scheduling request. It is not safe for concurrent use; a request is
// scheduled on one goroutine.
type Cache struct {
	regexps  map[string]*regexp.Regexp // nil value: pattern did not compile
	versions map[string]*versionConstraint
	semvers  map[string]*versionConstraint
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{
		regexps:  map[string]*regexp.Regexp{},
		versions: map[string]*versionConstraint{},
		semvers:  map[string]*versionConstraint{},
	}
}

func (c *Cache) regexp(pattern string) *regexp.Regexp {
	re, ok := c.regexps[pattern]
	if !ok {
		re, _ = regexp.Compile(pattern) // a bad pattern caches as nil: no match
		c.regexps[pattern] = re
	}
	return re
}

func (c *Cache) versionConstraint(s string, semver bool) *versionConstraint {
	m := c.versions
	if semver {
		m = c.semvers
	}
	vc, ok := m[s]
	if !ok {
		vc, _ = parseVersionConstraint(s, semver) // nil on error: no match
		m[s] = vc
	}
	return vc
}

// Constraint is a compiled constraint. Its String form is the key users see
// in AllocMetric.constraint_filtered.
type Constraint struct {
	key     string
	operand string
	l, r    Target
	cache   *Cache
	// Pre-compiled right-hand sides when the right operand is a literal.
	re      *regexp.Regexp
	vc      *versionConstraint
	set     []string
	literal bool
}

// CompileConstraint compiles c, using cache for patterns that depend on the
// node and for patterns shared between constraints.
func CompileConstraint(c *schedulerpb.Constraint, cache *Cache) *Constraint {
	k := &Constraint{
		key:     ConstraintKey(c),
		operand: c.GetOperand(),
		l:       ParseTarget(c.GetLTarget()),
		r:       ParseTarget(c.GetRTarget()),
		cache:   cache,
	}
	if k.r.Literal() {
		k.literal = true
		switch k.operand {
		case OpRegexp:
			k.re = cache.regexp(k.r.value)
		case OpVersion, OpSemver:
			k.vc = cache.versionConstraint(k.r.value, k.operand == OpSemver)
		case OpSetContains, OpSetContainsAll, OpSetContainsAny:
			k.set = splitSet(k.r.value)
		}
	}
	return k
}

// ConstraintKey renders a constraint the way users see it in placement
// failures: "<LTarget> <Operand> <RTarget>".
func ConstraintKey(c *schedulerpb.Constraint) string {
	return c.GetLTarget() + " " + c.GetOperand() + " " + c.GetRTarget()
}

// String returns the constraint's filter reason.
func (k *Constraint) String() string { return k.key }

// Unique reports whether the constraint reads a per-node unique value, so
// that its result cannot be shared by nodes of one computed class.
func (k *Constraint) Unique() bool { return k.l.unique() || k.r.unique() }

// Feasible reports whether the node satisfies the constraint.
func (k *Constraint) Feasible(n *schedulerpb.Node) bool {
	switch k.operand {
	case OpDistinctHosts, OpDistinctProperty:
		return true
	}
	lv, lok := k.l.Resolve(n)
	rv, rok := k.r.Resolve(n)
	switch k.operand {
	case OpEqual, OpEqualEqual, OpIs:
		return lok && rok && lv == rv
	case OpNotEqual, OpNot:
		// An unset attribute differs from any value, as in Nomad.
		return lok != rok || lv != rv
	case OpLess, OpLessEqual, OpGreater, OpGreaterEqual:
		return lok && rok && checkOrder(k.operand, lv, rv)
	case OpIsSet:
		return lok
	case OpIsNotSet:
		return !lok
	case OpRegexp:
		if !lok || !rok {
			return false
		}
		re := k.re
		if !k.literal {
			re = k.cache.regexp(rv)
		}
		return re != nil && re.MatchString(lv)
	case OpVersion, OpSemver:
		if !lok || !rok {
			return false
		}
		vc := k.vc
		if !k.literal {
			vc = k.cache.versionConstraint(rv, k.operand == OpSemver)
		}
		if vc == nil {
			return false
		}
		v, err := parseVersion(lv)
		return err == nil && vc.check(v)
	case OpSetContains, OpSetContainsAll, OpSetContainsAny:
		if !lok || !rok {
			return false
		}
		want := k.set
		if !k.literal {
			want = splitSet(rv)
		}
		return checkSet(k.operand == OpSetContainsAny, lv, want)
	}
	// An unknown operand can never be satisfied; job validation should have
	// refused it, and failing closed names it in the filter reasons.
	return false
}

// checkOrder compares numerically when both sides are integers or floats,
// else lexically.
func checkOrder(op, l, r string) bool {
	var c int
	if li, err := strconv.ParseInt(l, 10, 64); err == nil {
		if ri, err := strconv.ParseInt(r, 10, 64); err == nil {
			c = cmp3(li, ri)
			return orderHolds(op, c)
		}
	}
	if lf, err := strconv.ParseFloat(l, 64); err == nil {
		if rf, err := strconv.ParseFloat(r, 64); err == nil {
			c = cmp3(lf, rf)
			return orderHolds(op, c)
		}
	}
	return orderHolds(op, strings.Compare(l, r))
}

func cmp3[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func orderHolds(op string, c int) bool {
	switch op {
	case OpLess:
		return c < 0
	case OpLessEqual:
		return c <= 0
	case OpGreater:
		return c > 0
	case OpGreaterEqual:
		return c >= 0
	}
	return false
}

func splitSet(s string) []string {
	parts := strings.Split(s, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// checkSet reports whether the node's comma-separated list contains all
// (or, with anyOf, at least one) of want.
func checkSet(anyOf bool, have string, want []string) bool {
	haveSet := splitSet(have)
	contains := func(w string) bool {
		for _, h := range haveSet {
			if h == w {
				return true
			}
		}
		return false
	}
	for _, w := range want {
		found := contains(w)
		if anyOf && found {
			return true
		}
		if !anyOf && !found {
			return false
		}
	}
	return !anyOf
}

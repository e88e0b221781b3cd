package feasible

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadVersion is returned for a version or version constraint that does
// not parse. A constraint that does not parse filters every node, so a typo
// shows up as a named filter reason rather than as a silent match.
var ErrBadVersion = errors.New("malformed version")

// version is a dotted version with an optional pre-release and build
// metadata ("v1.2.3-beta.1+abc"). Missing segments count as zero, but the
// number the user wrote is kept because the pessimistic operator reads it.
type version struct {
	segments  [3]int64
	extra     []int64 // segments past the third, rare
	specified int
	pre       string
}

func parseVersion(s string) (version, error) {
	var v version
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i] // build metadata never orders versions
	}
	// The numeric part ends at the first '-' or letter.
	end := len(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '.' && (c < '0' || c > '9') {
			end = i
			break
		}
	}
	num, rest := s[:end], s[end:]
	if num == "" || strings.HasSuffix(num, ".") {
		return v, fmt.Errorf("%w: %q", ErrBadVersion, s)
	}
	if rest != "" {
		rest = strings.TrimPrefix(rest, "-")
		if rest == "" {
			return v, fmt.Errorf("%w: %q", ErrBadVersion, s)
		}
		v.pre = rest
	}
	i := 0
	for part := range strings.SplitSeq(num, ".") {
		n, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			return v, fmt.Errorf("%w: %q", ErrBadVersion, s)
		}
		if i < 3 {
			v.segments[i] = n
		} else {
			v.extra = append(v.extra, n)
		}
		v.specified++
		i++
	}
	return v, nil
}

func (v version) segment(i int) int64 {
	if i < 3 {
		return v.segments[i]
	}
	if i-3 < len(v.extra) {
		return v.extra[i-3]
	}
	return 0
}

func (v version) numSegments() int { return 3 + len(v.extra) }

// compareVersions orders versions: segments numerically, then a release
// above any of its pre-releases, then pre-releases identifier by identifier
// as semver 2.0 says (numeric identifiers below alphanumeric ones).
func compareVersions(a, b version) int {
	n := max(a.numSegments(), b.numSegments())
	for i := range n {
		if x, y := a.segment(i), b.segment(i); x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	switch {
	case a.pre == b.pre:
		return 0
	case a.pre == "":
		return 1
	case b.pre == "":
		return -1
	}
	return comparePrerelease(a.pre, b.pre)
}

func comparePrerelease(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		x, y := as[i], bs[i]
		if x == y {
			continue
		}
		xn, xerr := strconv.ParseInt(x, 10, 64)
		yn, yerr := strconv.ParseInt(y, 10, 64)
		switch {
		case xerr == nil && yerr == nil:
			if xn < yn {
				return -1
			}
			return 1
		case xerr == nil:
			return -1
		case yerr == nil:
			return 1
		case x < y:
			return -1
		default:
			return 1
		}
	}
	switch {
	case len(as) < len(bs):
		return -1
	case len(as) > len(bs):
		return 1
	}
	return 0
}

// versionTerm is one comma-separated clause of a version constraint.
type versionTerm struct {
	op string
	v  version
}

// versionConstraint is a parsed "version" or "semver" constraint such as
// ">= 1.2, < 2.0" or "~> 1.4.1". The two operands differ only in how
// pre-releases match: "version" keeps a pre-release out of a range unless
// the range names a pre-release of the same release; "semver" orders
// pre-releases like any other version.
type versionConstraint struct {
	terms  []versionTerm
	semver bool
}

var versionOps = []string{">=", "<=", "!=", "~>", "=", ">", "<"}

func parseVersionConstraint(s string, semver bool) (*versionConstraint, error) {
	vc := &versionConstraint{semver: semver}
	for clause := range strings.SplitSeq(s, ",") {
		clause = strings.TrimSpace(clause)
		op := ""
		for _, candidate := range versionOps {
			if rest, ok := strings.CutPrefix(clause, candidate); ok {
				op, clause = candidate, rest
				break
			}
		}
		v, err := parseVersion(clause)
		if err != nil {
			return nil, err
		}
		if op == "" {
			op = "="
		}
		vc.terms = append(vc.terms, versionTerm{op: op, v: v})
	}
	return vc, nil
}

func (vc *versionConstraint) check(v version) bool {
	for _, t := range vc.terms {
		if !vc.checkTerm(t, v) {
			return false
		}
	}
	return true
}

func (vc *versionConstraint) checkTerm(t versionTerm, v version) bool {
	if !vc.semver && !prereleaseAllowed(t, v) {
		return false
	}
	c := compareVersions(v, t.v)
	switch t.op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case ">":
		return c > 0
	case "<":
		return c < 0
	case ">=":
		return c >= 0
	case "<=":
		return c <= 0
	case "~>":
		return pessimistic(t.v, v, c)
	}
	return false
}

// prereleaseAllowed keeps pre-release versions out of plain ranges: a
// pre-release only satisfies a clause that itself names a pre-release of
// the same release, so ">= 1.0" does not pick up "2.0-rc1".
func prereleaseAllowed(t versionTerm, v version) bool {
	if v.pre == "" {
		return true
	}
	if t.v.pre == "" {
		return false
	}
	n := max(t.v.numSegments(), v.numSegments())
	for i := range n {
		if t.v.segment(i) != v.segment(i) {
			return false
		}
	}
	return true
}

// pessimistic implements "~>": at least the constraint version, and equal
// in every segment the user wrote except the last ("~> 1.4.1" means
// ">= 1.4.1, < 1.5"; "~> 1.4" means ">= 1.4, < 2").
func pessimistic(c, v version, cmp int) bool {
	if cmp < 0 {
		return false
	}
	for i := 0; i < c.specified-1; i++ {
		if v.segment(i) != c.segment(i) {
			return false
		}
	}
	return true
}

// CheckVersionConstraint reports whether s parses as the right-hand side
// of a "version" (semver false) or "semver" constraint, so that a job can
// be refused at submit rather than have the constraint filter every node.
func CheckVersionConstraint(s string, semver bool) error {
	_, err := parseVersionConstraint(s, semver)
	return err
}

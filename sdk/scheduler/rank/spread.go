package rank

import (
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// otherValues is the bucket of the values a spread's targets do not name,
// which share what the targets leave of 100%.
const otherValues = "\x00other"

// spread is one compiled spread block of a group.
type spread struct {
	attr   feasible.Target
	weight float64
	count  int
	// percent is each target's share; rest is what the targets leave.
	percent map[string]float64
	rest    float64
	// even: no targets, the count is shared evenly between seen values.
	even bool
	seen map[string]bool
	used map[string]int
}

func newSpread(s *schedulerpb.Spread, count int) *spread {
	sp := &spread{
		attr: feasible.ParseTarget(s.GetAttribute()), weight: float64(s.GetWeight()), count: count,
		percent: map[string]float64{}, seen: map[string]bool{}, used: map[string]int{},
	}
	total := 0.0
	for _, t := range s.GetTargets() {
		p := float64(max(t.GetPercent(), 0))
		sp.percent[t.GetValue()] += p
		total += p
	}
	sp.even = len(s.GetTargets()) == 0
	sp.rest = max(100-total, 0)
	return sp
}

// bucket is the value a node counts under, and whether it has one.
func (s *spread) bucket(n *schedulerpb.Node) (string, bool) {
	v, ok := s.attr.Resolve(n)
	if !ok {
		return "", false
	}
	if s.even {
		return v, true
	}
	if _, named := s.percent[v]; named {
		return v, true
	}
	return otherValues, true
}

func (s *spread) observe(nodes []*schedulerpb.Node) {
	if !s.even {
		return
	}
	for _, n := range nodes {
		if v, ok := s.attr.Resolve(n); ok {
			s.seen[v] = true
		}
	}
}

func (s *spread) add(n *schedulerpb.Node) {
	if b, ok := s.bucket(n); ok {
		s.used[b]++
		if s.even {
			s.seen[b] = true
		}
	}
}

// desired is the bucket's share of the group's count.
func (s *spread) desired(b string) float64 {
	if s.even {
		if len(s.seen) == 0 {
			return 0
		}
		return float64(s.count) / float64(len(s.seen))
	}
	p := s.rest
	if b != otherValues {
		p = s.percent[b]
	}
	return p / 100 * float64(s.count)
}

// boost is (desired - used) / desired for the node's bucket with this
// placement counted, in [-1, 1]; -1 (the largest penalty) for a node
// without the attribute or a bucket whose share is zero.
func (s *spread) boost(n *schedulerpb.Node) float64 {
	b, ok := s.bucket(n)
	if !ok {
		return -1
	}
	d := s.desired(b)
	if d <= 0 {
		return -1
	}
	used := float64(s.used[b] + 1)
	return max((d-used)/d, -1)
}

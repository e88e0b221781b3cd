// Package rank scores the feasible nodes of one placement, the way Nomad's
// service and batch schedulers rank them: each scoring component that
// applies to the placement gives a score in [-1, 1], and a node's final
// score is their average. The components are
//
//   - binpack: how full the node is once the allocation is placed (the
//     mean of its cpu and memory utilisation), so work packs onto the
//     fullest node that still fits it;
//   - job-anti-affinity: a penalty on nodes that already run allocations
//     of the same task group, (collisions+1)/count, so a group does not
//     pile onto one node when others are as good;
//   - node-reschedule-penalty: -1 on the nodes a failed allocation's
//     lineage ran on, so its replacement prefers another node;
//   - node-affinity: the weights of the affinity blocks the node matches
//     over the sum of all the blocks' absolute weights;
//   - allocation-spread: how far the node's value of each spread
//     attribute is below its target share of the group's count.
//
// Unlike Nomad, which leaves out a component whose score is exactly zero,
// a component that applies to a placement is averaged in for every node:
// every node of one placement is scored on the same scale, so a node at
// its spread target is not preferred over one below it merely because its
// zero dropped out of the average.
//
// Everything is per request and single-goroutine, like package feasible.
package rank

import (
	"cmp"
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/feasible"
)

// Score component names, as Nomad names its scorers.
const (
	ScorerBinPack           = "binpack"
	ScorerJobAntiAffinity   = "job-anti-affinity"
	ScorerReschedulePenalty = "node-reschedule-penalty"
	ScorerNodeAffinity      = "node-affinity"
	ScorerSpread            = "allocation-spread"
	// ScorerNormalized is the final score, the average of the others.
	ScorerNormalized = "normalized-score"
)

// BinPack is the node's utilisation once the placement is on it: the mean
// of its cpu and memory fractions, in [0, 1], higher is fuller. A
// dimension of zero capacity counts as full.
func BinPack(capacity, usedAfter feasible.Vec) float64 {
	frac := func(u, c int64) float64 {
		if c <= 0 {
			return 1
		}
		return min(max(float64(u)/float64(c), 0), 1)
	}
	return (frac(usedAfter.CPU, capacity.CPU) + frac(usedAfter.MemoryMB, capacity.MemoryMB)) / 2
}

// AntiAffinity is the penalty for placing one more allocation of a group
// of count allocations on a node that already holds collisions of them:
// 0 without collisions, else -(collisions+1)/count, at least -1.
func AntiAffinity(collisions, count int) float64 {
	if collisions <= 0 || count <= 0 {
		return 0
	}
	return max(-float64(collisions+1)/float64(count), -1)
}

// Group scores the placements of one task group. Build it with NewGroup,
// record every allocation of the group that the plan keeps or places with
// Add, and score a candidate node with Score.
type Group struct {
	count      int
	noAnti     bool
	affinities []affinity
	affSum     float64
	spreads    []*spread
	spreadSum  float64
	// onNode counts the group's allocations per node.
	onNode map[string]int
}

type affinity struct {
	c      *feasible.Constraint
	weight float64
}

// NewGroup compiles the scoring of tg within job: the affinities of the
// job, the group and its tasks, and the spreads of the job and the group.
func NewGroup(job *schedulerpb.Job, tg *schedulerpb.TaskGroup, cache *feasible.Cache) *Group {
	g := &Group{count: int(tg.GetCount()), onNode: map[string]int{}}
	add := func(as []*schedulerpb.Affinity) {
		for _, a := range as {
			if a.GetWeight() == 0 {
				continue
			}
			c := feasible.CompileConstraint(&schedulerpb.Constraint{
				LTarget: a.GetLTarget(), Operand: a.GetOperand(), RTarget: a.GetRTarget(),
			}, cache)
			w := float64(a.GetWeight())
			g.affinities = append(g.affinities, affinity{c: c, weight: w})
			g.affSum += max(w, -w)
		}
	}
	add(job.GetAffinities())
	add(tg.GetAffinities())
	for _, t := range tg.GetTasks() {
		add(t.GetAffinities())
	}
	for _, s := range append(slices.Clone(job.GetSpreads()), tg.GetSpreads()...) {
		if s.GetWeight() <= 0 {
			continue
		}
		g.spreads = append(g.spreads, newSpread(s, g.count))
		g.spreadSum += float64(s.GetWeight())
	}
	return g
}

// SetJobAntiAffinity turns the job-anti-affinity component on (the
// default, as Nomad scores service and batch placements) or off, for a
// scheduler that packs a group onto as few nodes as it can.
func (g *Group) SetJobAntiAffinity(on bool) { g.noAnti = !on }

// HasAffinities reports whether the group's placements are scored by
// affinity.
func (g *Group) HasAffinities() bool { return len(g.affinities) > 0 }

// HasSpreads reports whether the group's placements are scored by spread.
func (g *Group) HasSpreads() bool { return len(g.spreads) > 0 }

// Observe tells the group the nodes its allocations may go to, whose
// attribute values an even spread (one without targets) shares the count
// between. Call it once, before scoring.
func (g *Group) Observe(nodes []*schedulerpb.Node) {
	for _, s := range g.spreads {
		s.observe(nodes)
	}
}

// Add records an allocation of the group on n, kept or placed by the plan.
func (g *Group) Add(n *schedulerpb.Node) {
	g.onNode[n.GetId()]++
	for _, s := range g.spreads {
		s.add(n)
	}
}

// Affinity is the node's affinity score in [-1, 1]: the weights of the
// affinities it matches over the sum of the absolute weights.
func (g *Group) Affinity(n *schedulerpb.Node) float64 {
	if g.affSum == 0 {
		return 0
	}
	var sum float64
	for _, a := range g.affinities {
		if a.c.Feasible(n) {
			sum += a.weight
		}
	}
	return sum / g.affSum
}

// Spread is the node's spread score in [-1, 1]: for each spread, how far
// the node's attribute value is below its desired share once this
// allocation is placed, weighted by the spread's share of the weights.
func (g *Group) Spread(n *schedulerpb.Node) float64 {
	if g.spreadSum == 0 {
		return 0
	}
	var sum float64
	for _, s := range g.spreads {
		sum += s.boost(n) * s.weight / g.spreadSum
	}
	return sum
}

// Options are the per-placement facts of a score.
type Options struct {
	// Capacity and UsedAfter are the node's capacity and its usage with
	// the placement on it.
	Capacity, UsedAfter feasible.Vec
	// Penalized marks a node a failed allocation being replaced, or an
	// earlier one of its lineage, ran on.
	Penalized bool
	// Penalty is whether the placement replaces a failed allocation, so
	// the reschedule penalty applies to it (on every node, 0 on most).
	Penalty bool
}

// Score is the node's final score for one placement: the average of the
// components that apply.
func (g *Group) Score(n *schedulerpb.Node, o Options) float64 {
	sum := BinPack(o.Capacity, o.UsedAfter)
	parts := 1.0
	if g.count > 1 && !g.noAnti {
		sum += AntiAffinity(g.onNode[n.GetId()], g.count)
		parts++
	}
	if o.Penalty {
		if o.Penalized {
			sum--
		}
		parts++
	}
	if g.HasAffinities() {
		sum += g.Affinity(n)
		parts++
	}
	if g.HasSpreads() {
		sum += g.Spread(n)
		parts++
	}
	return sum / parts
}

// Top keeps the best K scores of a placement for AllocMetric.scores.
type Top struct {
	k       int
	entries []entry
}

type entry struct {
	node  string
	score float64
}

// MaxRetainedScores is how many node scores a placement's metric keeps.
const MaxRetainedScores = 5

// NewTop returns a Top that keeps k scores.
func NewTop(k int) *Top { return &Top{k: k} }

// Offer records a node's final score.
func (t *Top) Offer(node string, score float64) {
	better := func(a, b entry) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.node, b.node))
	}
	e := entry{node, score}
	if len(t.entries) == t.k && better(e, t.entries[t.k-1]) >= 0 {
		return
	}
	i, _ := slices.BinarySearchFunc(t.entries, e, better)
	t.entries = slices.Insert(t.entries, i, e)
	if len(t.entries) > t.k {
		t.entries = t.entries[:t.k]
	}
}

// Scores returns the kept scores keyed "<node ID>.normalized-score", as
// Nomad's AllocationMetric.Scores keys them; nil when none.
func (t *Top) Scores() map[string]float64 {
	if len(t.entries) == 0 {
		return nil
	}
	out := make(map[string]float64, len(t.entries))
	for _, e := range t.entries {
		out[e.node+"."+ScorerNormalized] = e.score
	}
	return out
}

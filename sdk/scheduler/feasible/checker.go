package feasible

import (
	"slices"
	"strings"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// ReasonMissingDrivers is the filter reason of a node that lacks a healthy
// driver one of the group's tasks needs.
const ReasonMissingDrivers = "missing drivers"

// Checker is one feasibility check. A node that fails is filtered for the
// returned reason, which is the key of AllocMetric.constraint_filtered.
type Checker interface {
	Check(n *schedulerpb.Node) (ok bool, reason string)
}

// Compile-time proof of what implements Checker.
var (
	_ Checker = ConstraintChecker(nil)
	_ Checker = (*DriverChecker)(nil)
	_ Checker = (*CSIChecker)(nil)
	_ Checker = (*NetworkModeChecker)(nil)
	_ Checker = (*GroupChain)(nil)
	_ Checker = Chain(nil)
)

// ConstraintChecker checks a list of constraints in order; the first one a
// node fails is the reason.
type ConstraintChecker []*Constraint

// NewConstraintChecker compiles constraints.
func NewConstraintChecker(cs []*schedulerpb.Constraint, cache *Cache) ConstraintChecker {
	out := make(ConstraintChecker, 0, len(cs))
	for _, c := range cs {
		out = append(out, CompileConstraint(c, cache))
	}
	return out
}

// Check implements Checker.
func (cc ConstraintChecker) Check(n *schedulerpb.Node) (bool, string) {
	for _, c := range cc {
		if !c.Feasible(n) {
			return false, c.String()
		}
	}
	return true, ""
}

// DriverChecker filters nodes that lack a healthy driver the tasks need.
type DriverChecker struct {
	drivers []string
}

// NewDriverChecker returns a checker for the drivers of the group's tasks.
func NewDriverChecker(tg *schedulerpb.TaskGroup) *DriverChecker {
	var ds []string
	for _, t := range tg.GetTasks() {
		if d := t.GetDriver(); d != "" && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	return &DriverChecker{drivers: ds}
}

// Check implements Checker.
func (dc *DriverChecker) Check(n *schedulerpb.Node) (bool, string) {
	have := n.GetDrivers()
	for _, d := range dc.drivers {
		if !slices.Contains(have, d) {
			return false, ReasonMissingDrivers
		}
	}
	return true, ""
}

// Chain runs checkers in order and stops at the first rejection.
type Chain []Checker

// Check implements Checker.
func (c Chain) Check(n *schedulerpb.Node) (bool, string) {
	for _, ch := range c {
		if ok, reason := ch.Check(n); !ok {
			return false, reason
		}
	}
	return true, ""
}

// GroupChain is the compiled feasibility chain of one task group: job
// constraints, then drivers, then the group's CSI volumes, then the group's
// and its tasks' constraints, the order Nomad's system stack uses, so the
// first reason reported for a node is the same.
type GroupChain struct {
	Chain
	// Escaped is true when a constraint reads a per-node unique value, or
	// the group claims CSI volumes, so a result for one node says nothing
	// about others of its computed class.
	Escaped bool
	csi     *CSIChecker
	host    *HostVolumeChecker
}

// NewGroupChain compiles the feasibility chain of tg within job, for a
// request that carries no CSI volumes: a group that asks for one finds it
// missing on every node. Use NewGroupChainCSI to place by volume.
func NewGroupChain(job *schedulerpb.Job, tg *schedulerpb.TaskGroup, cache *Cache) *GroupChain {
	return NewGroupChainCSI(job, tg, cache, nil)
}

// NewGroupChainCSI compiles the feasibility chain of tg within job against
// the request's CSI volumes (NewCSIVolumes, shared by the request's
// groups).
func NewGroupChainCSI(job *schedulerpb.Job, tg *schedulerpb.TaskGroup, cache *Cache, vols *CSIVolumes) *GroupChain {
	jobCons := NewConstraintChecker(job.GetConstraints(), cache)
	groupCons := make([]*schedulerpb.Constraint, 0, len(tg.GetConstraints()))
	groupCons = append(groupCons, tg.GetConstraints()...)
	for _, t := range tg.GetTasks() {
		groupCons = append(groupCons, t.GetConstraints()...)
	}
	tgCons := NewConstraintChecker(groupCons, cache)
	gc := &GroupChain{Chain: Chain{jobCons, NewDriverChecker(tg)}}
	if csi := NewCSIChecker(tg, vols); csi != nil {
		gc.csi = csi
		gc.Chain = append(gc.Chain, csi)
		gc.Escaped = true
	}
	if nm := NewNetworkModeChecker(tg); nm != nil {
		// Modes are not part of the computed class: a result for
		// one node says nothing about another.
		gc.Chain = append(gc.Chain, nm)
		gc.Escaped = true
	}
	gc.Chain = append(gc.Chain, tgCons)
	// Host volumes after the group's constraints, as in Nomad's stacks.
	// The computed class does not cover a node's host volumes: a verdict
	// holds for its node only.
	if host := NewHostVolumeChecker(tg); host != nil {
		gc.host = host
		gc.Chain = append(gc.Chain, host)
		gc.Escaped = true
	}
	for _, cc := range []ConstraintChecker{jobCons, tgCons} {
		for _, c := range cc {
			gc.Escaped = gc.Escaped || c.Unique()
		}
	}
	return gc
}

// Check implements Checker for the group's allocation of index 0.
func (gc *GroupChain) Check(n *schedulerpb.Node) (bool, string) {
	return gc.CheckAlloc(n, "", "")
}

// CheckAlloc checks the node for the group's allocation named allocName
// ("job.group[i]"; its index picks per_alloc volumes). self, when set, is
// the existing allocation kept on the node (an in-place update), whose own
// volume claims do not count against it.
func (gc *GroupChain) CheckAlloc(n *schedulerpb.Node, allocName, self string) (bool, string) {
	for _, ch := range gc.Chain {
		var ok bool
		var reason string
		if csi, isCSI := ch.(*CSIChecker); isCSI {
			ok, reason = csi.CheckIndex(n, AllocIndex(allocName), self)
		} else if host, isHost := ch.(*HostVolumeChecker); isHost {
			ok, reason = host.CheckIndex(n, AllocIndex(allocName))
		} else {
			ok, reason = ch.Check(n)
		}
		if !ok {
			return false, reason
		}
	}
	return true, ""
}

// PerAlloc reports whether the group's feasibility depends on the
// allocation's index (per_alloc volumes): a node that fails one index may
// take another.
func (gc *GroupChain) PerAlloc() bool {
	return gc.csi != nil && gc.csi.perAlloc || gc.host != nil && gc.host.perAlloc
}

// Claims reports whether the group's feasibility on a node must be
// checked per allocation: it changes with the plan's own placements (the
// group asks for CSI volumes, whose claims Placed records), so a verdict
// taken before a placement may not hold after it, or it depends on the
// allocation's index (per_alloc volumes).
func (gc *GroupChain) Claims() bool { return gc.csi != nil || gc.PerAlloc() }

// Placed records that the plan places the allocation named allocName on
// node, so its volume claims count for the placements that follow.
func (gc *GroupChain) Placed(node, allocName string) {
	if gc.csi != nil {
		gc.csi.Claim(node, AllocIndex(allocName))
	}
}

// DefaultNodePool is the pool of a job or node that names none.
const DefaultNodePool = "default"

// AllNodePools is the job node pool that matches every pool.
const AllNodePools = "all"

// PoolMatches reports whether a node of nodePool can run a job of jobPool.
func PoolMatches(jobPool, nodePool string) bool {
	if jobPool == "" {
		jobPool = DefaultNodePool
	}
	if nodePool == "" {
		nodePool = DefaultNodePool
	}
	return jobPool == AllNodePools || jobPool == nodePool
}

// DatacenterMatches reports whether dc matches any of the job's datacenter
// patterns. Patterns are globs where '*' matches any run of characters; an
// empty list means every datacenter, as Nomad canonicalizes it to ["*"].
func DatacenterMatches(patterns []string, dc string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if globMatch(p, dc) {
			return true
		}
	}
	return false
}

// globMatch matches s against a pattern whose only metacharacter is '*'.
func globMatch(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	parts := strings.Split(pattern, "*")
	first, last := parts[0], parts[len(parts)-1]
	if !strings.HasPrefix(s, first) {
		return false
	}
	s = s[len(first):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}

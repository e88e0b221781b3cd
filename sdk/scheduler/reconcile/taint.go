// Package reconcile diffs what a system or sysbatch job wants on each node
// (one allocation per group index) against the allocations that exist, and
// sorts every allocation and every missing name into a bucket: place,
// update, migrate, stop, ignore, lost, disconnecting or reconnecting. It also
// holds the helpers around that diff: tainted-node and lost-marking
// pre-passes, the in-place versus destructive decision and the limiter that
// paces destructive updates.
//
// Everything is pure and deterministic: nodes are visited in ID order.
package reconcile

import (
	"cmp"
	"slices"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// Allocation desired and client statuses, and node statuses, as the
// protocol spells them.
const (
	DesiredRun   = "run"
	DesiredStop  = "stop"
	DesiredEvict = "evict"

	ClientPending  = "pending"
	ClientRunning  = "running"
	ClientComplete = "complete"
	ClientFailed   = "failed"
	ClientLost     = "lost"
	ClientUnknown  = "unknown"

	NodeInitializing = "initializing"
	NodeReady        = "ready"
	NodeDown         = "down"
	NodeDisconnected = "disconnected"
)

// ServerTerminal reports whether the server wants the alloc stopped.
func ServerTerminal(a *schedulerpb.Allocation) bool {
	d := a.GetDesiredStatus()
	return d == DesiredStop || d == DesiredEvict
}

// ClientTerminal reports whether the alloc finished on its client.
func ClientTerminal(a *schedulerpb.Allocation) bool {
	switch a.GetClientStatus() {
	case ClientComplete, ClientFailed, ClientLost:
		return true
	}
	return false
}

// Terminal reports whether the alloc is over from either side.
func Terminal(a *schedulerpb.Allocation) bool { return ServerTerminal(a) || ClientTerminal(a) }

// NodeIsReady reports whether new work may be placed on the node: status
// ready, no drain, eligible for scheduling.
func NodeIsReady(n *schedulerpb.Node) bool {
	return n.GetStatus() == NodeReady && !n.GetDraining() && n.GetEligible()
}

// Tainted maps the ID of every node hosting one of allocs that is missing
// (value nil), down, draining or disconnected. Allocations on such nodes
// cannot stay as they are.
func Tainted(allocs []*schedulerpb.Allocation, nodes map[string]*schedulerpb.Node) map[string]*schedulerpb.Node {
	out := map[string]*schedulerpb.Node{}
	for _, a := range allocs {
		id := a.GetNodeId()
		if _, seen := out[id]; seen {
			continue
		}
		n, ok := nodes[id]
		switch {
		case !ok || n == nil:
			out[id] = nil
		case n.GetStatus() == NodeDown, n.GetDraining(), n.GetStatus() == NodeDisconnected:
			out[id] = n
		}
	}
	return out
}

// nodeGone reports whether a tainted entry is a missing or down node.
func nodeGone(tainted map[string]*schedulerpb.Node, nodeID string) bool {
	n, ok := tainted[nodeID]
	return ok && (n == nil || n.GetStatus() == NodeDown)
}

// LostStops returns the allocs the server already stopped whose client,
// on a down or missing node, still claims pending or running: nobody will
// ever report them finished, so they are marked lost.
func LostStops(allocs []*schedulerpb.Allocation, tainted map[string]*schedulerpb.Node) []*schedulerpb.Allocation {
	var out []*schedulerpb.Allocation
	for _, a := range allocs {
		if !ServerTerminal(a) || !nodeGone(tainted, a.GetNodeId()) {
			continue
		}
		if cs := a.GetClientStatus(); cs == ClientPending || cs == ClientRunning {
			out = append(out, a)
		}
	}
	return out
}

// TerminalIndex maps node ID → alloc name → the newest terminal alloc of
// that name on that node.
type TerminalIndex map[string]map[string]*schedulerpb.Allocation

// Get returns the terminal alloc named name on node, or nil.
func (t TerminalIndex) Get(node, name string) *schedulerpb.Allocation {
	return t[node][name]
}

// Split separates live allocs from terminal ones and indexes the terminal
// ones by node and name, keeping the newest (highest create index) of each.
// Live allocs come back sorted by node, name and ID.
func Split(allocs []*schedulerpb.Allocation) (live []*schedulerpb.Allocation, terminal TerminalIndex) {
	terminal = TerminalIndex{}
	for _, a := range allocs {
		if !Terminal(a) {
			live = append(live, a)
			continue
		}
		byName := terminal[a.GetNodeId()]
		if byName == nil {
			byName = map[string]*schedulerpb.Allocation{}
			terminal[a.GetNodeId()] = byName
		}
		if prev := byName[a.GetName()]; prev == nil || a.GetCreateIndex() > prev.GetCreateIndex() {
			byName[a.GetName()] = a
		}
	}
	slices.SortFunc(live, byNodeNameID)
	return live, terminal
}

func byNodeNameID(x, y *schedulerpb.Allocation) int {
	return cmp.Or(
		cmp.Compare(x.GetNodeId(), y.GetNodeId()),
		cmp.Compare(x.GetName(), y.GetName()),
		cmp.Compare(x.GetId(), y.GetId()),
	)
}

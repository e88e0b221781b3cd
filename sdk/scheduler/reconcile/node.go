package reconcile

import (
	"slices"
	"strconv"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// AllocTuple is one wanted or existing allocation slot on a node.
type AllocTuple struct {
	// Name is the allocation name, "<job name>.<group>[<index>]".
	Name string
	// TaskGroup is the job's current group for Name; nil for a stop of an
	// alloc whose group no longer exists.
	TaskGroup *schedulerpb.TaskGroup
	// Alloc is the existing allocation the tuple is about. For a placement
	// it is the terminal alloc being replaced (PreviousAllocation), or nil.
	Alloc *schedulerpb.Allocation
	// NodeID is the node the tuple is on.
	NodeID string
}

// Result is the outcome of reconciling a job against its allocations. Each
// bucket is ordered by node ID, then by alloc name.
type Result struct {
	Place         []AllocTuple
	Update        []AllocTuple
	Migrate       []AllocTuple
	Stop          []AllocTuple
	Ignore        []AllocTuple
	Lost          []AllocTuple
	Disconnecting []AllocTuple
	Reconnecting  []AllocTuple
}

// Input is what the node reconciler reads.
type Input struct {
	// Job is the job at its latest version; nil or stopped wants nothing.
	Job *schedulerpb.Job
	// Sysbatch turns on the sysbatch rules: finished allocs are done and
	// are not re-placed while the job is unchanged.
	Sysbatch bool
	// Ready are the ready nodes the job may be placed on (pool, datacenter
	// and readiness already applied), by ID.
	Ready map[string]*schedulerpb.Node
	// NotReady are the nodes of the job's pool that are not ready.
	NotReady map[string]struct{}
	// Tainted is the output of Tainted.
	Tainted map[string]*schedulerpb.Node
	// Live are the job's non-terminal allocs; Terminal indexes the rest.
	Live     []*schedulerpb.Allocation
	Terminal TerminalIndex
	// NeedsReconnect reports that an alloc was disconnected and has not
	// been reconciled since its client came back; ReconnectExpired that its
	// disconnect window has passed. The protocol carries neither fact yet,
	// so both may be nil, which means "no".
	NeedsReconnect   func(*schedulerpb.Allocation) bool
	ReconnectExpired func(*schedulerpb.Allocation) bool
}

// Required lists the allocation names a job wants on every node, in group
// then index order.
type Required struct {
	Names  []string
	Groups []*schedulerpb.TaskGroup // parallel to Names
	byName map[string]*schedulerpb.TaskGroup
}

// RequiredAllocs returns the names a job wants on each node: Count of them
// per group, indexed from 0. A nil or stopped job wants none.
func RequiredAllocs(job *schedulerpb.Job) *Required {
	r := &Required{byName: map[string]*schedulerpb.TaskGroup{}}
	if job == nil || job.GetStop() {
		return r
	}
	for _, tg := range job.GetTaskGroups() {
		for i := range int(tg.GetCount()) {
			name := AllocName(job.GetName(), tg.GetName(), i)
			r.Names = append(r.Names, name)
			r.Groups = append(r.Groups, tg)
			r.byName[name] = tg
		}
	}
	return r
}

// Group returns the group wanting name, or nil if name is not wanted.
func (r *Required) Group(name string) *schedulerpb.TaskGroup { return r.byName[name] }

// AllocName renders "<job>.<group>[<index>]".
func AllocName(job, group string, index int) string {
	return job + "." + group + "[" + strconv.Itoa(index) + "]"
}

// JobChanged reports whether the alloc runs an older job than job; job
// registration only bumps the modify index on a real change.
func JobChanged(job *schedulerpb.Job, a *schedulerpb.Allocation) bool {
	return job.GetJobModifyIndex() != a.GetJobModifyIndex()
}

// Nodes reconciles the job against its allocations on every node that has
// a live alloc of the job or is a ready candidate, in node ID order.
func Nodes(in *Input) *Result {
	req := RequiredAllocs(in.Job)
	res := &Result{}

	// Live is sorted by node; slice it into per-node runs.
	liveByNode := map[string][]*schedulerpb.Allocation{}
	live := slices.Clone(in.Live)
	if !slices.IsSortedFunc(live, byNodeNameID) {
		slices.SortFunc(live, byNodeNameID)
	}
	for i := 0; i < len(live); {
		j := i + 1
		for j < len(live) && live[j].GetNodeId() == live[i].GetNodeId() {
			j++
		}
		liveByNode[live[i].GetNodeId()] = live[i:j]
		i = j
	}

	ids := make([]string, 0, len(in.Ready)+len(liveByNode))
	for id := range in.Ready {
		ids = append(ids, id)
	}
	for id := range liveByNode {
		if _, ok := in.Ready[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)

	if len(in.Live) == 0 && len(in.Terminal) == 0 {
		// A fresh job places every name on every ready node.
		res.Place = make([]AllocTuple, 0, len(in.Ready)*len(req.Names))
	}
	r := &nodeReconciler{in: in, req: req, res: res}
	for _, id := range ids {
		r.node(id, liveByNode[id])
	}
	return res
}

type nodeReconciler struct {
	in  *Input
	req *Required
	res *Result
}

// node reconciles one node: Pass A sorts its live allocs, Pass B decides
// for every wanted name without a live alloc.
func (r *nodeReconciler) node(id string, live []*schedulerpb.Allocation) {
	for _, a := range live {
		r.passA(id, a)
	}
	for i, name := range r.req.Names {
		if slices.ContainsFunc(live, func(a *schedulerpb.Allocation) bool { return a.GetName() == name }) {
			continue
		}
		r.passB(id, name, r.req.Groups[i])
	}
}

func (r *nodeReconciler) passA(id string, a *schedulerpb.Allocation) {
	in, res := r.in, r.res
	tg := r.req.Group(a.GetName())
	t := AllocTuple{Name: a.GetName(), TaskGroup: tg, Alloc: a, NodeID: id}
	if tg == nil {
		// Job stopped, group removed, count lowered or a misnamed alloc.
		t.TaskGroup = jobGroup(in.Job, a.GetTaskGroup())
		res.Stop = append(res.Stop, t)
		return
	}
	if a.GetMigrate() {
		res.Migrate = append(res.Migrate, t)
		if _, tainted := in.Tainted[id]; !tainted && !in.Sysbatch {
			if _, ready := in.Ready[id]; ready {
				// Stopped by a user (alloc stop) on a node that still
				// takes the job: replaced where it was, chained to it, as
				// Nomad's system scheduler does. Sysbatch work that a
				// user stopped stays stopped.
				res.Place = append(res.Place, t)
			}
		}
		return
	}
	cs := a.GetClientStatus()
	reconnect, expired := false, false
	if (cs == ClientUnknown || cs == ClientRunning) && in.NeedsReconnect != nil {
		reconnect = in.NeedsReconnect(a)
		expired = reconnect && in.ReconnectExpired != nil && in.ReconnectExpired(a)
	}
	if expired {
		res.Lost = append(res.Lost, t)
		return
	}
	if cs == ClientUnknown && a.GetDesiredStatus() == DesiredRun {
		// Its client may come back; keep it until it does or expires.
		res.Ignore = append(res.Ignore, t)
		return
	}
	node, tainted := in.Tainted[id]
	if !tainted && reconnect {
		res.Reconnecting = append(res.Reconnecting, t)
		return
	}
	if tainted {
		switch {
		case in.Sysbatch && a.GetRanSuccessfully():
			res.Ignore = append(res.Ignore, t)
		case node != nil && node.GetStatus() == NodeDisconnected && cs == ClientRunning:
			res.Disconnecting = append(res.Disconnecting, t)
		case node == nil || node.GetStatus() == NodeDown:
			res.Lost = append(res.Lost, t)
		default:
			// Draining but alive: left alone until the drainer migrates it.
			res.Ignore = append(res.Ignore, t)
		}
		return
	}
	if _, notReady := in.NotReady[id]; notReady {
		if JobChanged(in.Job, a) {
			res.Stop = append(res.Stop, t)
		} else {
			res.Ignore = append(res.Ignore, t)
		}
		return
	}
	if _, ok := in.Ready[id]; !ok {
		// The node left the job's datacenters or pool.
		res.Stop = append(res.Stop, t)
		return
	}
	if JobChanged(in.Job, a) {
		res.Update = append(res.Update, t)
		return
	}
	res.Ignore = append(res.Ignore, t)
}

func (r *nodeReconciler) passB(id, name string, tg *schedulerpb.TaskGroup) {
	in, res := r.in, r.res
	prev := in.Terminal.Get(id, name)
	if in.Sysbatch && prev != nil {
		// Finished sysbatch work is done: it runs again only for a new job
		// version (and only if that version changes it destructively).
		t := AllocTuple{Name: name, TaskGroup: tg, Alloc: prev, NodeID: id}
		if JobChanged(in.Job, prev) {
			res.Update = append(res.Update, t)
		} else {
			res.Ignore = append(res.Ignore, t)
		}
		return
	}
	if _, tainted := in.Tainted[id]; tainted {
		return
	}
	if _, ok := in.Ready[id]; !ok {
		return
	}
	res.Place = append(res.Place, AllocTuple{Name: name, TaskGroup: tg, Alloc: prev, NodeID: id})
}

func jobGroup(job *schedulerpb.Job, name string) *schedulerpb.TaskGroup {
	for _, tg := range job.GetTaskGroups() {
		if tg.GetName() == name {
			return tg
		}
	}
	return nil
}

package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"sort"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Register upserts a client node, marks it ready and creates the evals
// that bring system jobs (and still-running sysbatch jobs) to it. It returns
// the heartbeat TTL the client must honour.
func (ep Nodes) Register(ctx context.Context, in *structs.Node) (time.Duration, error) {
	s := ep.srv
	if r, ok, err := forward[NodeRegisterArgs, TTLReply](ctx, s, "Node.Register", &NodeRegisterArgs{Node: in}); ok {
		return ttlOf(r), err
	}
	if in == nil || in.ID == "" {
		return 0, structs.NewError(structs.ErrInvalid, "Node: missing node ID")
	}
	if in.SecretID == "" {
		return 0, structs.NewError(structs.ErrInvalid, "Node: missing node SecretID")
	}
	if in.Datacenter == "" {
		return 0, structs.NewError(structs.ErrInvalid, "Node: missing datacenter")
	}
	// A node is copied into every scheduling request: its strings, lists
	// and maps are bounded as a job's are.
	if err := structs.CheckBounds("Node", in); err != nil {
		return 0, err
	}
	if err := in.ValidateCSI(); err != nil {
		return 0, err
	}
	if err := in.ValidateHostVolumes(); err != nil {
		return 0, err
	}
	existing, err := s.State().NodeByID(nil, in.ID)
	if err != nil {
		return 0, err
	}
	if existing != nil && existing.SecretID != in.SecretID {
		return 0, structs.NewError(structs.ErrPermissionDenied, "node secret ID does not match")
	}
	node := in.Copy()
	if node.NodePool == "" {
		node.NodePool = structs.NodePoolDefault
	}
	switch {
	case !structs.ValidNodePoolName(node.NodePool):
		return 0, structs.NewError(structs.ErrInvalid, "Node NodePool %q: must be 1 to 128 letters, digits, '-' or '_'", node.NodePool)
	case node.NodePool == structs.NodePoolAll:
		return 0, structs.NewError(structs.ErrInvalid, "Node NodePool %q: a node cannot join the built-in pool %q", node.NodePool, structs.NodePoolAll)
	}
	if node.SchedulingEligibility == "" {
		node.SchedulingEligibility = structs.NodeSchedulingEligible
	}
	node.Status = structs.NodeStatusReady
	node.StatusUpdatedAt = s.cfg.Now().Unix()
	node.ComputedClass = computedClass(node)
	if existing == nil {
		node.Events = []*structs.NodeEvent{{Message: "Node registered", Subsystem: "Cluster", Timestamp: s.cfg.Now()}}
	}
	var evals []*structs.Evaluation
	// Host volumes are not in the computed class: a node that came back
	// with other volumes may now take system jobs it could not before.
	if existing == nil || existing.Status != structs.NodeStatusReady || existing.ComputedClass != node.ComputedClass ||
		!structs.HostVolumesEqual(existing.HostVolumes, node.HostVolumes) {
		if evals, err = ep.nodeEvals(node, true); err != nil {
			return 0, err
		}
	}
	if _, err := s.raftApply(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node, Evals: evals}); err != nil {
		return 0, err
	}
	ttl := s.heartbeat.reset(node.ID)
	if existing == nil {
		s.logger.Info("node registered", "node_id", node.ID, "name", node.Name, "datacenter", node.Datacenter)
	}
	return ttl, nil
}

// Heartbeat keeps a node alive; a node that was down becomes ready again.
func (ep Nodes) Heartbeat(ctx context.Context, nodeID, secretID string) (time.Duration, error) {
	s := ep.srv
	if r, ok, err := forward[NodeAuthArgs, TTLReply](ctx, s, "Node.Heartbeat", &NodeAuthArgs{NodeID: nodeID, SecretID: secretID}); ok {
		return ttlOf(r), err
	}
	node, err := s.authNode(nodeID, secretID)
	if err != nil {
		return 0, err
	}
	if !s.IsLeader() {
		return 0, structs.NewError(structs.ErrNoLeader, "No cluster leader")
	}
	ttl := s.heartbeat.reset(nodeID)
	if node.Status != structs.NodeStatusReady {
		if err := s.setNodeStatus(node, structs.NodeStatusReady, "Node heartbeat received"); err != nil {
			return 0, err
		}
	}
	return ttl, nil
}

func (s *Server) authNode(nodeID, secretID string) (*structs.Node, error) {
	node, err := s.State().NodeByID(nil, nodeID)
	if err != nil {
		return nil, err
	}
	if node == nil {
		return nil, structs.NewError(structs.ErrNotFound, "node %s not found", nodeID)
	}
	if node.SecretID != secretID {
		return nil, structs.NewError(structs.ErrPermissionDenied, "node secret ID does not match")
	}
	return node, nil
}

// setNodeStatus writes a status change and the evals it causes, in one entry.
func (s *Server) setNodeStatus(node *structs.Node, status, msg string) error {
	// The evals are of the node as it will be: a node going down
	// evaluates the allocs it strands (see nodeEvals).
	next := *node
	next.Status = status
	evals, err := s.Nodes().nodeEvals(&next, status == structs.NodeStatusReady)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	req := &structs.NodeUpdateStatusRequest{
		NodeID: node.ID, Status: status, UpdatedAt: now.Unix(),
		NodeEvent: &structs.NodeEvent{Message: msg, Subsystem: "Cluster", Timestamp: now},
		Evals:     evals,
	}
	if _, err := s.raftApply(structs.NodeUpdateStatusRequestType, req); err != nil {
		return err
	}
	s.logger.Info("node status changed", "node_id", node.ID, "from", node.Status, "to", status)
	return nil
}

// Allocs blocks until the node's allocations change past minIndex and
// returns them, each with its job.
func (ep Nodes) Allocs(ctx context.Context, nodeID, secretID string, minIndex uint64, maxWait time.Duration) ([]*structs.Allocation, uint64, error) {
	s := ep.srv
	if _, err := s.authNode(nodeID, secretID); err != nil {
		return nil, 0, err
	}
	if maxWait <= 0 {
		maxWait = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, maxWait)
	defer cancel()
	var out []*structs.Allocation
	index, err := s.State().BlockingQuery(ctx, minIndex, func(ws memdb.WatchSet, st *state.StateStore) (uint64, error) {
		allocs, err := st.AllocsByNode(ws, nodeID)
		if err != nil {
			return 0, err
		}
		out = allocs
		return nodeAllocsIndex(allocs, st.Index("allocs")), nil
	})
	if err != nil && ctx.Err() == nil {
		return nil, 0, err
	}
	return out, index, nil
}

// nodeAllocsIndex is the index a node's allocs answer with: the highest
// modify index among them, so that a write to other nodes' allocs (which
// wakes the query's watch) leaves it unchanged and the query waits again
// rather than answering with nothing new. A node without allocs answers
// with the allocs table's index (an alloc removed from it is then seen);
// never 0, which would not block.
func nodeAllocsIndex(allocs []*structs.Allocation, table uint64) uint64 {
	var idx uint64
	for _, a := range allocs {
		idx = max(idx, a.ModifyIndex)
	}
	if len(allocs) == 0 {
		idx = table
	}
	return max(idx, 1)
}

// UpdateAllocs records client-side alloc state. An alloc that ends while
// still desired is re-evaluated, so the scheduler replaces it, when its job
// type declares EvalOnAllocEnd (system does); one that completes under a
// type that runs to completion is done, and needs no eval. The follow-up waits longer
// each time the job's allocs keep ending on the node (allocEndBackoff): a
// task that cannot start must not be replaced in a tight loop.
func (ep Nodes) UpdateAllocs(ctx context.Context, nodeID, secretID string, allocs []*structs.Allocation) error {
	s := ep.srv
	if _, ok, err := forward[NodeUpdateAllocsArgs, Empty](ctx, s, "Node.UpdateAllocs", &NodeUpdateAllocsArgs{NodeID: nodeID, SecretID: secretID, Allocs: allocs}); ok {
		return err
	}
	if _, err := s.authNode(nodeID, secretID); err != nil {
		return err
	}
	var evals []*structs.Evaluation
	seen := map[string]bool{}
	now := s.cfg.Now().UnixNano()
	for _, a := range allocs {
		stored, err := s.State().AllocByID(nil, a.ID)
		if err != nil {
			return err
		}
		if stored == nil {
			continue
		}
		if stored.NodeID != nodeID {
			return structs.NewError(structs.ErrPermissionDenied, "alloc %s is not on node %s", a.ID, nodeID)
		}
		if a.NetworkStatus != nil {
			// The client's report of the alloc's own network, bounded
			// before it reaches Raft.
			if err := structs.CheckBounds("NetworkStatus", a.NetworkStatus); err != nil {
				return structs.NewError(structs.ErrInvalid, "alloc %s: %v", a.ID, err)
			}
		}
		a.ModifyTime = now
		for _, trigger := range []func(stored, update *structs.Allocation, seen map[string]bool) (*structs.Evaluation, error){
			ep.allocRunningEval, ep.migrationHealthyEval,
		} {
			if ev, err := trigger(stored, a, seen); err != nil {
				return err
			} else if ev != nil {
				evals = append(evals, ev)
			}
		}
		terminalNow := a.ClientStatus == structs.AllocClientStatusFailed || a.ClientStatus == structs.AllocClientStatusComplete
		job := stored.Job
		b := allocBehavior(stored)
		if !terminalNow || stored.ClientTerminalStatus() || stored.ServerTerminalStatus() || !b.EvalOnAllocEnd {
			continue
		}
		if b.RunsToCompletion && a.ClientStatus == structs.AllocClientStatusComplete {
			// Its work is done: nothing replaces it, and an eval (delayed
			// by allocEndBackoff when allocs keep ending on the node)
			// would keep the job pending after its last alloc finished.
			continue
		}
		key := job.Namespace + "/" + job.ID
		if seen[key] {
			continue
		}
		seen[key] = true
		cur, err := s.State().JobByID(nil, job.Namespace, job.ID)
		if err != nil {
			return err
		}
		if cur == nil || cur.Stop {
			continue
		}
		// failed-follow-up is a trigger every node scheduler handles
		// (alloc-failure is the generic scheduler's).
		ev := s.newEval(cur, structs.EvalTriggerFailedFollowUp)
		ev.JobModifyIndex = cur.JobModifyIndex
		ev.NodeID = nodeID
		var delay time.Duration
		if !reschedulesByPolicy(stored, a.ClientStatus) {
			if delay, err = ep.allocEndBackoff(cur, nodeID, now); err != nil {
				return err
			}
		}
		if delay > 0 {
			ev.WaitUntil = time.Unix(0, now).Add(delay).UTC()
		}
		evals = append(evals, ev)
	}
	_, err := s.raftApply(structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: allocs, Evals: evals})
	return err
}

// UpdateEligibility toggles whether new work may be placed on a node.
func (ep Nodes) UpdateEligibility(ctx context.Context, nodeID, elig string) (*structs.NodeEligibilityUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[NodeEligibilityArgs, structs.NodeEligibilityUpdateResponse](ctx, s, "Node.UpdateEligibility", &NodeEligibilityArgs{NodeID: nodeID, Eligibility: elig}); ok {
		return r, err
	}
	if elig != structs.NodeSchedulingEligible && elig != structs.NodeSchedulingIneligible {
		return nil, structs.NewError(structs.ErrInvalid, "Eligibility: %q is not valid (must be %q or %q)", elig, structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible)
	}
	node, err := s.State().NodeByID(nil, nodeID)
	if err != nil {
		return nil, err
	}
	if node == nil {
		return nil, structs.NewError(structs.ErrNotFound, "node not found")
	}
	if node.DrainStrategy != nil && elig == structs.NodeSchedulingEligible {
		return nil, structs.NewError(structs.ErrInvalid, "can not set node's scheduling eligibility to eligible: node has an active drain")
	}
	var evals []*structs.Evaluation
	if elig == structs.NodeSchedulingEligible && node.SchedulingEligibility != elig {
		if evals, err = ep.nodeEvals(node, true); err != nil {
			return nil, err
		}
	}
	now := s.cfg.Now()
	index, err := s.raftApply(structs.NodeUpdateEligibilityRequestType, &structs.NodeUpdateEligibilityRequest{
		NodeID: nodeID, Eligibility: elig, UpdatedAt: now.Unix(),
		NodeEvent: &structs.NodeEvent{Message: "Node marked as " + elig, Subsystem: "Cluster", Timestamp: now},
		Evals:     evals,
	})
	if err != nil {
		return nil, err
	}
	return nodeUpdateResponse(index, evals), nil
}

// UpdateDrain starts (spec != nil) or cancels (spec == nil) a drain.
func (ep Nodes) UpdateDrain(ctx context.Context, nodeID string, spec *structs.DrainSpec, markEligible bool, meta map[string]string) (*structs.NodeEligibilityUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[NodeDrainArgs, structs.NodeEligibilityUpdateResponse](ctx, s, "Node.UpdateDrain", &NodeDrainArgs{NodeID: nodeID, Spec: spec, MarkEligible: markEligible, Meta: meta}); ok {
		return r, err
	}
	if err := structs.CheckBounds("Meta", meta); err != nil {
		return nil, err // kept in the node's LastDrain
	}
	node, err := s.State().NodeByID(nil, nodeID)
	if err != nil {
		return nil, err
	}
	if node == nil {
		return nil, structs.NewError(structs.ErrNotFound, "node not found")
	}
	now := s.cfg.Now()
	req := &structs.NodeUpdateDrainRequest{NodeID: nodeID, MarkEligible: markEligible, UpdatedAt: now.Unix(), Meta: meta}
	msg := "Node drain strategy cleared"
	if spec != nil {
		ds := &structs.DrainStrategy{DrainSpec: *spec, StartedAt: now}
		if spec.Deadline > 0 {
			ds.ForceDeadline = now.Add(spec.Deadline)
		} else if spec.Deadline < 0 {
			ds.ForceDeadline = now
		}
		req.DrainStrategy = ds
		msg = "Node drain strategy set"
	}
	req.NodeEvent = &structs.NodeEvent{Message: msg, Subsystem: "Drain", Timestamp: now}
	if spec == nil && markEligible {
		if req.Evals, err = ep.nodeEvals(node, true); err != nil {
			return nil, err
		}
	}
	index, err := s.raftApply(structs.NodeUpdateDrainRequestType, req)
	if err != nil {
		return nil, err
	}
	return nodeUpdateResponse(index, req.Evals), nil
}

// nodeUpdateResponse answers a node change committed at index together with
// the evals it caused.
func nodeUpdateResponse(index uint64, evals []*structs.Evaluation) *structs.NodeEligibilityUpdateResponse {
	resp := &structs.NodeEligibilityUpdateResponse{NodeModifyIndex: index, Index: index}
	if len(evals) > 0 {
		resp.EvalCreateIndex = index
		for _, e := range evals {
			resp.EvalIDs = append(resp.EvalIDs, e.ID)
		}
	}
	return resp
}

// StopAlloc marks an alloc for migration and evaluates its job: the
// scheduler stops it (and, for system jobs, places a fresh one later).
func (ep Nodes) StopAlloc(ctx context.Context, allocID string) (*structs.AllocStopResponse, error) {
	s := ep.srv
	if r, ok, err := forward[AllocStopArgs, structs.AllocStopResponse](ctx, s, "Alloc.Stop", &AllocStopArgs{AllocID: allocID}); ok {
		return r, err
	}
	alloc, err := s.State().AllocByID(nil, allocID)
	if err != nil {
		return nil, err
	}
	if alloc == nil {
		return nil, structs.NewError(structs.ErrNotFound, "alloc not found")
	}
	job, err := s.State().JobByID(nil, alloc.Namespace, alloc.JobID)
	if err != nil {
		return nil, err
	}
	if job == nil {
		job = alloc.Job
	}
	ev := s.newEval(job, structs.EvalTriggerAllocStop)
	if cur := job; cur != nil {
		ev.JobModifyIndex = cur.JobModifyIndex
	}
	yes := true
	index, err := s.raftApply(structs.AllocUpdateDesiredTransitionRequestType, &structs.AllocUpdateDesiredTransitionRequest{
		Allocs: map[string]*structs.DesiredTransition{allocID: {Migrate: &yes}},
		Evals:  []*structs.Evaluation{ev},
	})
	if err != nil {
		return nil, err
	}
	return &structs.AllocStopResponse{EvalID: ev.ID, Index: index}, nil
}

// nodeEvals builds one node-update eval per job affected by a change of node
// (the node as it is or will be; the change does not move it between pools or
// datacenters), to be written in the change's own entry, which also gives
// them their NodeModifyIndex. What a job's type declares decides:
// EvalOnNodeUpdate (system) evaluates, on every change, each job of the type
// whose pool and datacenters take the node and each with live allocs on it;
// EvalOnAllocNodeChange evaluates each job of the type with live allocs on
// it;
// EvalOnNodeJoin (sysbatch) evaluates, when the node joins (becomes
// schedulable), each job of the type that takes it and is not dead, so a
// node that joins mid-run receives it. Parents never are.
func (ep Nodes) nodeEvals(node *structs.Node, joining bool) ([]*structs.Evaluation, error) {
	s := ep.srv
	st := s.State()
	jobs := map[structs.NamespacedID]*structs.Job{}
	allocs, err := st.AllocsByNode(nil, node.ID)
	if err != nil {
		return nil, err
	}
	for _, a := range allocs {
		// The alloc's own job version decides, as it was placed under it.
		// An alloc the server stopped still counts on a node that is down
		// while its client never reported it ended: only an eval of its
		// job marks it lost, which hands its volume claims to the volume
		// watcher. Its job may be stopped or purged meanwhile: the eval is
		// then of the alloc's own job version.
		stranded := node.TerminalStatus() && a.ServerTerminalStatus() && !a.ClientTerminalStatus()
		if b := allocBehavior(a); (a.TerminalStatus() && !stranded) || !(b.EvalOnNodeUpdate || b.EvalOnAllocNodeChange) {
			continue
		}
		j, err := st.JobByID(nil, a.Namespace, a.JobID)
		if err != nil {
			return nil, err
		}
		if j == nil && stranded && a.Job != nil {
			j = a.Job
		}
		if j != nil {
			jobs[structs.NamespacedID{ID: j.ID, Namespace: j.Namespace}] = j
		}
	}
	all, err := st.JobsEvaluatedOnNodeChange(nil)
	if err != nil {
		return nil, err
	}
	for _, j := range all {
		if j.Stop || j.IsParent() || !jobTakesNode(j, node) {
			continue
		}
		b := j.TypeBehavior
		switch {
		case b == nil:
			continue
		case b.EvalOnNodeUpdate:
		case b.EvalOnNodeJoin && joining && j.Status != structs.JobStatusDead:
		default:
			continue
		}
		jobs[structs.NamespacedID{ID: j.ID, Namespace: j.Namespace}] = j
	}
	keys := make([]structs.NamespacedID, 0, len(jobs))
	for k := range jobs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	out := make([]*structs.Evaluation, 0, len(keys))
	for _, k := range keys {
		j := jobs[k]
		ev := s.newEval(j, structs.EvalTriggerNodeUpdate)
		ev.NodeID, ev.JobModifyIndex = node.ID, j.JobModifyIndex
		out = append(out, ev)
	}
	return out, nil
}

// jobTakesNode reports whether the job's pool and datacenters include node.
func jobTakesNode(j *structs.Job, n *structs.Node) bool {
	if j.NodePool != "" && j.NodePool != structs.NodePoolAll && j.NodePool != n.NodePool {
		return false
	}
	for _, dc := range j.Datacenters {
		if ok, _ := path.Match(dc, n.Datacenter); ok {
			return true
		}
	}
	return false
}

// computedClass hashes what feasibility reads of a node, so nodes that are
// alike share one class (unique.* attributes are left out).
func computedClass(n *structs.Node) string {
	h := sha256.New()
	write := func(k, v string) { h.Write([]byte(k)); h.Write([]byte{0}); h.Write([]byte(v)); h.Write([]byte{0}) }
	write("dc", n.Datacenter)
	write("class", n.NodeClass)
	write("pool", n.NodePool)
	for _, m := range []map[string]string{n.Attributes, n.Meta} {
		keys := make([]string, 0, len(m))
		for k := range m {
			if len(k) >= 7 && k[:7] == "unique." {
				continue
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			write(k, m[k])
		}
		write("--", "")
	}
	drivers := make([]string, 0, len(n.Drivers))
	for k, d := range n.Drivers {
		if d != nil && d.Detected && d.Healthy {
			drivers = append(drivers, k)
		}
	}
	sort.Strings(drivers)
	for _, d := range drivers {
		write("driver", d)
	}
	return "v1:" + hex.EncodeToString(h.Sum(nil)[:8])
}

func ttlOf(r *TTLReply) time.Duration {
	if r == nil {
		return 0
	}
	return r.TTL
}

// reschedulesByPolicy reports whether an alloc failing now is replaced
// by its group's reschedule policy, whose delay paces the replacement: the
// scheduler must see the failure at once to schedule its follow-up, so the
// crash-loop backoff does not apply.
func reschedulesByPolicy(stored *structs.Allocation, clientStatus string) bool {
	if clientStatus != structs.AllocClientStatusFailed || stored.Job == nil {
		return false
	}
	tg := stored.Job.LookupTaskGroup(stored.TaskGroup)
	return tg != nil && tg.ReschedulePolicy != nil
}

// Backoff of the replacement of allocs that keep ending on a node.
const (
	allocEndWindow    = time.Hour
	allocEndBaseDelay = 10 * time.Second
	allocEndMaxDelay  = 10 * time.Minute
	allocEndFreeEnds  = 1 // ends in the window replaced at once
)

// allocEndBackoff is how long the follow-up of an alloc of job ending on
// node waits: nothing for the first end within allocEndWindow, then
// allocEndBaseDelay doubling with each further end, up to allocEndMaxDelay.
// The ends counted are the job's allocs on the node that ended in the
// window, the one ending now included.
func (ep Nodes) allocEndBackoff(job *structs.Job, nodeID string, now int64) (time.Duration, error) {
	s := ep.srv
	allocs, err := s.State().AllocsByNode(nil, nodeID)
	if err != nil {
		return 0, err
	}
	since := now - int64(allocEndWindow)
	ends := 1 // the alloc ending now, not yet stored as ended
	for _, a := range allocs {
		if a.Namespace == job.Namespace && a.JobID == job.ID && a.ClientTerminalStatus() && a.ModifyTime >= since {
			ends++
		}
	}
	return allocEndDelay(ends), nil
}

// allocEndDelay is the backoff after ends ends in the window.
func allocEndDelay(ends int) time.Duration {
	if ends <= allocEndFreeEnds {
		return 0
	}
	delay := allocEndBaseDelay
	for i := allocEndFreeEnds + 1; i < ends && delay < allocEndMaxDelay; i++ {
		delay *= 2
	}
	return min(delay, allocEndMaxDelay)
}

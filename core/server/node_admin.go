package server

import (
	"context"
	"fmt"
	"sort"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// NodeRefArgs names a node, for Node.Evaluate and Node.Purge.
type NodeRefArgs struct{ NodeID string }

// registerNodeAdminRPC exposes node evaluate and purge, which followers
// forward to the leader. Absent from rpcAccess: server-only (a client
// never purges itself).
func (s *Server) registerNodeAdminRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "Node.Evaluate", func(ctx context.Context, a *NodeRefArgs) (*structs.NodeEligibilityUpdateResponse, error) {
		return s.Nodes().Evaluate(mark(ctx), a.NodeID)
	})
	rpc.Handle(rs, "Node.Purge", func(ctx context.Context, a *NodeRefArgs) (*structs.NodeEligibilityUpdateResponse, error) {
		return s.Nodes().Purge(mark(ctx), a.NodeID)
	})
}

// Evaluate creates an eval for every job the node matters to (POST
// /v1/node/<id>/evaluate, `nomad node eval`): the jobs with allocations
// on it and those whose type evaluates node changes or joins and whose
// pool and datacenters take it, as a node joining would. The evals are
// one Raft entry; a node that matters to no job writes nothing and
// answers no evals.
func (ep Nodes) Evaluate(ctx context.Context, nodeID string) (*structs.NodeEligibilityUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[NodeRefArgs, structs.NodeEligibilityUpdateResponse](ctx, s, "Node.Evaluate", &NodeRefArgs{NodeID: nodeID}); ok {
		return r, err
	}
	node, err := s.State().NodeByID(nil, nodeID)
	if err != nil {
		return nil, err
	}
	if node == nil {
		return nil, structs.NewError(structs.ErrNotFound, "node not found")
	}
	evals, err := ep.nodeEvals(node, true)
	if err != nil {
		return nil, err
	}
	if len(evals) == 0 {
		return &structs.NodeEligibilityUpdateResponse{NodeModifyIndex: node.ModifyIndex}, nil
	}
	for _, ev := range evals {
		ev.NodeModifyIndex = node.ModifyIndex
	}
	index, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals})
	if err != nil {
		return nil, err
	}
	resp := nodeUpdateResponse(index, evals)
	resp.NodeModifyIndex = node.ModifyIndex
	s.logger.Info("node evaluated", "node_id", nodeID, "evals", len(evals), "index", index)
	return resp, nil
}

// Purge deletes a node from the cluster (POST /v1/node/<id>/purge, `nomad
// node purge`) and evaluates every job that had an allocation on it that
// its client had not finished, so that the scheduler replaces what ran
// there. As in Nomad these are two Raft entries, the delete first: evals
// written before it would see the node still present. Should the second
// fail, the error says so; an eval of any of those jobs (the next
// register, or node evaluate on another node) then finds the allocations
// of the missing node lost.
func (ep Nodes) Purge(ctx context.Context, nodeID string) (*structs.NodeEligibilityUpdateResponse, error) {
	s := ep.srv
	if r, ok, err := forward[NodeRefArgs, structs.NodeEligibilityUpdateResponse](ctx, s, "Node.Purge", &NodeRefArgs{NodeID: nodeID}); ok {
		return r, err
	}
	st := s.State()
	node, err := st.NodeByID(nil, nodeID)
	if err != nil {
		return nil, err
	}
	if node == nil {
		return nil, structs.NewError(structs.ErrNotFound, "node not found")
	}
	allocs, err := st.AllocsByNode(nil, nodeID)
	if err != nil {
		return nil, err
	}
	jobs := map[structs.NamespacedID]*structs.Job{}
	for _, a := range allocs {
		if a.ClientTerminalStatus() {
			continue
		}
		j, err := st.JobByID(nil, a.Namespace, a.JobID)
		if err != nil {
			return nil, err
		}
		if j == nil {
			j = a.Job
		}
		if j != nil && !j.IsParent() {
			jobs[structs.NamespacedID{ID: j.ID, Namespace: j.Namespace}] = j
		}
	}
	index, err := s.raftApply(structs.NodeDeregisterRequestType, &structs.NodeDeregisterRequest{NodeIDs: []string{nodeID}})
	if err != nil {
		return nil, err
	}
	s.logger.Info("node purged", "node_id", nodeID, "index", index)
	resp := &structs.NodeEligibilityUpdateResponse{NodeModifyIndex: index, Index: index}
	if len(jobs) == 0 {
		return resp, nil
	}
	keys := make([]structs.NamespacedID, 0, len(jobs))
	for k := range jobs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	evals := make([]*structs.Evaluation, 0, len(keys))
	for _, k := range keys {
		j := jobs[k]
		ev := s.newEval(j, structs.EvalTriggerNodeUpdate)
		ev.NodeID, ev.NodeModifyIndex, ev.JobModifyIndex = nodeID, index, j.JobModifyIndex
		evals = append(evals, ev)
	}
	evalIndex, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals})
	if err != nil {
		return resp, fmt.Errorf("node %s purged at index %d, but evaluating its %d jobs failed: %w", nodeID, index, len(evals), err)
	}
	out := nodeUpdateResponse(evalIndex, evals)
	out.NodeModifyIndex = index
	return out, nil
}

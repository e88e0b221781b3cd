package server

import (
	"context"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// MaxNodePoolsPerRequest bounds one node pool upsert.
const MaxNodePoolsPerRequest = 64

// RPC argument types of the node pool endpoints.
type (
	NodePoolUpsertArgs struct{ NodePools []*structs.NodePool }
	NodePoolDeleteArgs struct{ Name string }
)

// register exposes the node pool writes, which followers
// forward to the leader. They are absent from rpcAccess: server-only.
func (ep NodePools) register(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "NodePool.Upsert", func(ctx context.Context, a *NodePoolUpsertArgs) (*IndexReply, error) {
		idx, err := ep.Upsert(mark(ctx), a.NodePools)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
	rpc.Handle(rs, "NodePool.Delete", func(ctx context.Context, a *NodePoolDeleteArgs) (*IndexReply, error) {
		idx, err := ep.Delete(mark(ctx), a.Name)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
}

// Upsert creates or updates node pools, all of them in one Raft
// entry, and returns its index. The built-in pools ("default", "all") are
// refused. A follower forwards to the leader.
func (ep NodePools) Upsert(ctx context.Context, pools []*structs.NodePool) (uint64, error) {
	s := ep.srv
	if r, ok, err := forward[NodePoolUpsertArgs, IndexReply](ctx, s, "NodePool.Upsert", &NodePoolUpsertArgs{NodePools: pools}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	switch {
	case len(pools) == 0:
		return 0, structs.NewError(structs.ErrInvalid, "NodePools: at least one node pool is required")
	case len(pools) > MaxNodePoolsPerRequest:
		return 0, structs.NewError(structs.ErrInvalid, "NodePools: %d node pools, more than %d per request", len(pools), MaxNodePoolsPerRequest)
	}
	seen := make(map[string]bool, len(pools))
	copies := make([]*structs.NodePool, 0, len(pools))
	for _, p := range pools {
		if err := p.Validate(); err != nil {
			return 0, err
		}
		if structs.IsBuiltinNodePool(p.Name) {
			return 0, structs.NewError(structs.ErrInvalid, "node pool %q: modifying a built-in node pool is not allowed", p.Name)
		}
		if seen[p.Name] {
			return 0, structs.NewError(structs.ErrInvalid, "node pool %q: named twice in one request", p.Name)
		}
		seen[p.Name] = true
		c := p.Copy()
		c.CreateIndex, c.ModifyIndex = 0, 0
		copies = append(copies, c)
	}
	idx, err := s.raftApply(structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: copies})
	if err != nil {
		return 0, err
	}
	for _, p := range copies {
		s.logger.Info("node pool upserted", "node_pool", p.Name, "index", idx)
	}
	return idx, nil
}

// Delete deletes a node pool and returns the entry's index. A
// built-in pool, or a pool that still has nodes or non-terminal jobs, is
// refused with structs.ErrInvalid, a missing one with structs.ErrNotFound,
// before anything is proposed; the FSM refuses them again should a node or
// a job arrive in between. A follower forwards to the leader.
func (ep NodePools) Delete(ctx context.Context, name string) (uint64, error) {
	s := ep.srv
	if r, ok, err := forward[NodePoolDeleteArgs, IndexReply](ctx, s, "NodePool.Delete", &NodePoolDeleteArgs{Name: name}); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	switch {
	case name == "":
		return 0, structs.NewError(structs.ErrInvalid, "node pool name: missing")
	case len(name) > 128:
		return 0, structs.NewError(structs.ErrInvalid, "node pool name: longer than 128 bytes")
	case structs.IsBuiltinNodePool(name):
		return 0, structs.NewError(structs.ErrInvalid, "node pool %q: deleting a built-in node pool is not allowed", name)
	}
	st := s.State()
	p, err := st.NodePoolByName(nil, name)
	if err != nil {
		return 0, err
	}
	if p == nil {
		return 0, structs.NewError(structs.ErrNotFound, "node pool not found: %s", name)
	}
	if err := st.NodePoolInUse(name); err != nil {
		return 0, err
	}
	idx, err := s.raftApply(structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{name}})
	if err != nil {
		return 0, err
	}
	s.logger.Info("node pool deleted", "node_pool", name, "index", idx)
	return idx, nil
}

// checkNodePool refuses a job naming a node pool that does not exist
// (structs.NodePoolMissingError). The FSM checks again when it applies the
// register (RequireNodePool), which a concurrent pool delete cannot slip
// past.
func (ep Jobs) checkNodePool(job *structs.Job) error {
	s := ep.srv
	pool := job.NodePool
	if pool == "" {
		pool = structs.NodePoolDefault
	}
	p, err := s.State().NodePoolByName(nil, pool)
	if err != nil {
		return err
	}
	if p == nil {
		return structs.NodePoolMissingError(job.ID, pool)
	}
	return nil
}

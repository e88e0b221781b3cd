package server

import (
	"context"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/structs"
)

// RPC argument and reply types of the namespace endpoints.
type (
	NamespaceUpsertArgs struct{ Namespaces []*structs.Namespace }
	NamespaceDeleteArgs struct{ Name string }
)

// register exposes the namespace writes, which followers
// forward to the leader. They are absent from rpcAccess: server-only.
func (ep Namespaces) register(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "Namespace.Upsert", func(ctx context.Context, a *NamespaceUpsertArgs) (*IndexReply, error) {
		idx, err := ep.Upsert(mark(ctx), a.Namespaces)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
	rpc.Handle(rs, "Namespace.Delete", func(ctx context.Context, a *NamespaceDeleteArgs) (*IndexReply, error) {
		idx, err := ep.Delete(mark(ctx), a.Name)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
}

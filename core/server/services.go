package server

import (
	"context"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/server/serviceregs"
	"github.com/drover-org/drover/core/structs"
)

// Native service discovery (provider "nomad"): package serviceregs checks
// and writes; these methods forward to the leader and expose the RPCs.

func (ep Services) regs() *serviceregs.Registry {
	s := ep.srv
	return serviceregs.New(serviceregs.Config{State: s.State, Apply: s.raftApply, AuthNode: s.authNode})
}

// Update is a client's upsert and delete of its own node's native
// service registrations (RPC ServiceRegistration.NodeUpdate), forwarded to
// the leader (serviceregs.Registry.Update).
func (ep Services) Update(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error {
	if _, ok, err := forward[structs.ServiceRegistrationNodeArgs, Empty](ctx, ep.srv, "ServiceRegistration.NodeUpdate", args); ok {
		return err
	}
	return ep.regs().Update(args)
}

// Lookup is a client's read of one service's registrations (RPC
// ServiceRegistration.Lookup; serviceregs.Registry.Lookup).
func (ep Services) Lookup(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
	return ep.regs().Lookup(ctx, args)
}

// Delete deletes one registration of namespace ns
// (`DELETE /v1/service/<name>/<id>`), forwarded to the leader. A missing
// one, or one of another service or namespace, is ErrNotFound.
func (ep Services) Delete(ctx context.Context, ns, name, id string) (uint64, error) {
	args := &ServiceDeleteArgs{Namespace: ns, ServiceName: name, ID: id}
	if r, ok, err := forward[ServiceDeleteArgs, IndexReply](ctx, ep.srv, "ServiceRegistration.Delete", args); ok {
		if err != nil {
			return 0, err
		}
		return r.Index, nil
	}
	return ep.regs().Delete(ns, name, id)
}

// ServiceDeleteArgs is a forwarded DeleteServiceRegistration.
type ServiceDeleteArgs struct {
	Namespace, ServiceName, ID string
}

// register exposes the client's calls (rpcAccess lets a client
// make them for its own node only) and the forwarded delete (server-only).
func (ep Services) register(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "ServiceRegistration.NodeUpdate", func(ctx context.Context, a *structs.ServiceRegistrationNodeArgs) (*Empty, error) {
		return &Empty{}, ep.Update(mark(ctx), a)
	})
	rpc.Handle(rs, "ServiceRegistration.Lookup", func(ctx context.Context, a *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
		return ep.Lookup(mark(ctx), a)
	})
	rpc.Handle(rs, "ServiceRegistration.Delete", func(ctx context.Context, a *ServiceDeleteArgs) (*IndexReply, error) {
		idx, err := ep.Delete(mark(ctx), a.Namespace, a.ServiceName, a.ID)
		if err != nil {
			return nil, err
		}
		return &IndexReply{Index: idx}, nil
	})
}

// Package serviceregs is native service discovery (provider "nomad") on
// the server: clients register the services of their running allocations
// and read them back for their templates; the HTTP API lists and deletes
// them. The state store drops an allocation's registrations when it ends
// or is reaped, and a node's when the node goes down.
//
// The server's Services endpoint forwards writes to the leader and calls
// the Registry there; the Registry checks, bounds and writes.
package serviceregs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

const (
	// A blocking lookup waits 5 minutes by default, as the other blocking
	// reads, and 10 at most.
	defaultServiceLookupWait = 5 * time.Minute
	maxServiceLookupWait     = 10 * time.Minute
	// maxServiceIDBytes bounds a registration's ID, service name and the
	// other identifiers a client sends.
	maxServiceIDBytes = 512
)

// Config is what a Registry needs.
type Config struct {
	// State returns the server's current state store (a snapshot restore
	// replaces it).
	State func() *state.StateStore
	// Apply proposes a Raft entry and returns its index (the server's
	// raftApply).
	Apply func(t structs.MessageType, msg any) (uint64, error)
	// AuthNode returns the node nodeID if secretID is its secret, an
	// error of the right kind otherwise.
	AuthNode func(nodeID, secretID string) (*structs.Node, error)
}

// Registry serves the service registration calls. It holds no state of
// its own: a value per call is fine.
type Registry struct{ cfg Config }

// New returns a Registry.
func New(cfg Config) *Registry { return &Registry{cfg: cfg} }

// Update applies a client's upsert and delete of its own node's native
// service registrations (RPC ServiceRegistration.NodeUpdate) on the
// leader, written in one Raft entry. The node's secret is checked;
// a registration or deletion naming another node's allocation is refused
// (ErrPermissionDenied) and nothing is written. Registrations of
// allocations that are unknown (reaped) or have ended, and every one of a
// node marked down, are dropped: the client learns of the end from its
// own allocations. The server stamps
// each registration's node, datacenter, namespace and job from the
// allocation, so a client cannot register into another namespace.
func (reg *Registry) Update(args *structs.ServiceRegistrationNodeArgs) error {
	if args == nil {
		return structs.NewError(structs.ErrInvalid, "missing service registrations")
	}
	if n := len(args.Upsert) + len(args.DeleteAllocIDs); n > structs.MaxRegistrationsPerRequest {
		return structs.NewError(structs.ErrInvalid, "Upsert and DeleteAllocIDs: %d entries, more than %d per request", n, structs.MaxRegistrationsPerRequest)
	}
	node, err := reg.cfg.AuthNode(args.NodeID, args.SecretID)
	if err != nil {
		return err
	}
	st := reg.cfg.State()
	// allocOf returns the allocation id names if it is this node's, nil
	// if it is unknown, and refuses another node's.
	allocs := map[string]*structs.Allocation{}
	allocOf := func(id string) (*structs.Allocation, error) {
		if a, ok := allocs[id]; ok {
			return a, nil
		}
		a, err := st.AllocByID(nil, id)
		if err != nil {
			return nil, err
		}
		if a != nil && a.NodeID != node.ID {
			return nil, structs.NewError(structs.ErrPermissionDenied, "allocation %s is not on node %s", id, node.ID)
		}
		allocs[id] = a
		return a, nil
	}
	req := &structs.ServiceRegistrationUpsertRequest{}
	for i, r := range args.Upsert {
		if err := checkRegistration(i, r); err != nil {
			return err
		}
		a, err := allocOf(r.AllocID)
		if err != nil {
			return err
		}
		if a == nil || a.ClientTerminalStatus() || node.Status == structs.NodeStatusDown {
			continue
		}
		c := copyRegistration(r)
		c.NodeID, c.Datacenter, c.Namespace, c.JobID = node.ID, node.Datacenter, a.Namespace, a.JobID
		c.CreateIndex, c.ModifyIndex = 0, 0
		req.Services = append(req.Services, c)
	}
	for _, id := range args.DeleteAllocIDs {
		if id == "" || len(id) > maxServiceIDBytes {
			return structs.NewError(structs.ErrInvalid, "DeleteAllocIDs: an empty or over-long allocation ID")
		}
		a, err := allocOf(id)
		if err != nil {
			return err
		}
		if a != nil && !slices.Contains(req.DeleteAllocIDs, id) {
			req.DeleteAllocIDs = append(req.DeleteAllocIDs, id)
		}
	}
	if len(req.Services) == 0 && len(req.DeleteAllocIDs) == 0 {
		return nil
	}
	_, err = reg.cfg.Apply(structs.ServiceRegistrationUpsertRequestType, req)
	return err
}

// checkRegistration bounds one registration a client sends; check output
// beyond MaxCheckOutputBytes is cut rather than refused.
func checkRegistration(i int, r *structs.ServiceRegistration) error {
	switch {
	case r == nil:
		return structs.NewError(structs.ErrInvalid, "Upsert[%d]: null is not allowed", i)
	case r.ID == "" || r.ServiceName == "" || r.AllocID == "":
		return structs.NewError(structs.ErrInvalid, "Upsert[%d]: ID, ServiceName and AllocID are required", i)
	case len(r.ID) > maxServiceIDBytes || len(r.AllocID) > maxServiceIDBytes || len(r.Address) > structs.MaxServiceStringBytes:
		return structs.NewError(structs.ErrInvalid, "Upsert[%d]: ID, AllocID or Address longer than allowed", i)
	case len(r.ServiceName) > structs.MaxServiceStringBytes:
		return structs.NewError(structs.ErrInvalid, "Upsert[%d]: ServiceName is %d bytes, more than %d", i, len(r.ServiceName), structs.MaxServiceStringBytes)
	case len(r.Tags) > structs.MaxServiceTags:
		return structs.NewError(structs.ErrInvalid, "Upsert[%d]: %d tags, more than %d", i, len(r.Tags), structs.MaxServiceTags)
	case len(r.Checks) > structs.MaxChecksPerService:
		return structs.NewError(structs.ErrInvalid, "Upsert[%d]: %d check results, more than %d", i, len(r.Checks), structs.MaxChecksPerService)
	case r.Port < 0 || r.Port > structs.MaxPort:
		return structs.NewError(structs.ErrInvalid, "Upsert[%d]: port %d is outside 0-%d", i, r.Port, structs.MaxPort)
	}
	for _, t := range r.Tags {
		if len(t) > structs.MaxServiceStringBytes {
			return structs.NewError(structs.ErrInvalid, "Upsert[%d]: a tag of %d bytes, more than %d", i, len(t), structs.MaxServiceStringBytes)
		}
	}
	for j, c := range r.Checks {
		if c == nil {
			return structs.NewError(structs.ErrInvalid, "Upsert[%d].Checks[%d]: null is not allowed", i, j)
		}
		for _, f := range []string{c.ID, c.Check, c.Group, c.Task, c.Service, c.Mode, c.Status} {
			if len(f) > structs.MaxServiceStringBytes {
				return structs.NewError(structs.ErrInvalid, "Upsert[%d].Checks[%d]: a field longer than %d bytes", i, j, structs.MaxServiceStringBytes)
			}
		}
	}
	return nil
}

// copyRegistration copies r with its own tags and check results, the
// output of each cut to MaxCheckOutputBytes.
func copyRegistration(r *structs.ServiceRegistration) *structs.ServiceRegistration {
	c := *r
	c.Tags = slices.Clone(r.Tags)
	if r.Checks != nil {
		c.Checks = make([]*structs.CheckStatus, len(r.Checks))
		for i, cs := range r.Checks {
			cc := *cs
			if len(cc.Output) > structs.MaxCheckOutputBytes {
				// Cut on a rune boundary: the output is shown as text.
				cc.Output = strings.ToValidUTF8(cc.Output[:structs.MaxCheckOutputBytes], "")
			}
			c.Checks[i] = &cc
		}
	}
	return &c
}

// Lookup is a client's read of one service's registrations (RPC
// ServiceRegistration.Lookup), for its templates: any node with a valid
// secret may read, without an ACL token. With MinIndex set it blocks until
// the registrations' index passes it or MaxWait (5 minutes by default, 10
// at most) ends, and then answers what is current.
func (reg *Registry) Lookup(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
	if args == nil {
		return nil, structs.NewError(structs.ErrInvalid, "missing lookup")
	}
	if _, err := reg.cfg.AuthNode(args.NodeID, args.SecretID); err != nil {
		return nil, err
	}
	if (!args.All && args.ServiceName == "") || len(args.ServiceName) > structs.MaxServiceStringBytes || len(args.Namespace) > maxServiceIDBytes {
		return nil, structs.NewError(structs.ErrInvalid, "ServiceName: required, at most %d bytes", structs.MaxServiceStringBytes)
	}
	ns := args.Namespace
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	wait := args.MaxWait
	if wait <= 0 {
		wait = defaultServiceLookupWait
	}
	wait = min(wait, maxServiceLookupWait)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var out []*structs.ServiceRegistration
	index, err := reg.cfg.State().BlockingQuery(ctx, args.MinIndex, func(ws memdb.WatchSet, st *state.StateStore) (uint64, error) {
		var regs []*structs.ServiceRegistration
		var err error
		if args.All {
			regs, err = st.ServiceRegistrations(ws, ns)
		} else {
			regs, err = st.ServiceRegistrationsByName(ws, ns, args.ServiceName)
		}
		if err != nil {
			return 0, err
		}
		out = regs
		return max(st.Index(state.TableServiceRegistrations), 1), nil
	})
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err // the caller went away
	}
	reply := &structs.ServiceLookupReply{Index: index, Services: make([]*structs.ServiceRegistration, 0, len(out))}
	for _, r := range out {
		reply.Services = append(reply.Services, copyRegistration(r))
	}
	return reply, nil
}

// Delete deletes one registration of namespace ns
// (`DELETE /v1/service/<name>/<id>`) on the leader. A missing
// one, or one of another service or namespace, is ErrNotFound.
func (reg *Registry) Delete(ns, name, id string) (uint64, error) {
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	r, err := reg.cfg.State().ServiceRegistrationByID(nil, id)
	if err != nil {
		return 0, err
	}
	if r == nil || r.Namespace != ns || r.ServiceName != name {
		return 0, structs.NewError(structs.ErrNotFound, "service registration %q of service %q not found", id, name)
	}
	return reg.cfg.Apply(structs.ServiceRegistrationDeleteByIDRequestType,
		&structs.ServiceRegistrationDeleteByIDRequest{Namespace: ns, ID: id})
}

package server

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

// Task reads of variables for templates (nomadVar, nomadVarList): a
// client reads, with its node's credentials, what a task of one of its
// allocations may read by its workload identity (structs.TaskVariablePaths).

const (
	defaultTaskVarWait = 5 * time.Minute
	maxTaskVarWait     = 10 * time.Minute
)

// TaskRead answers a client's VariableTaskReadArgs; with MinIndex it
// blocks until the variables table passes it or MaxWait ends. A path the
// task may not read answers as absent (consul-template's Peek treats a 403
// as absent too); a list holds only readable paths.
func (ep Variables) TaskRead(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
	s := ep.srv
	if args == nil {
		return nil, structs.NewError(structs.ErrInvalid, "missing read")
	}
	if _, err := s.authNode(args.NodeID, args.SecretID); err != nil {
		return nil, err
	}
	if len(args.Path) > structs.MaxVariablePathLength || len(args.Prefix) > structs.MaxVariablePathLength {
		return nil, structs.NewError(structs.ErrInvalid, "Path: longer than %d bytes", structs.MaxVariablePathLength)
	}
	alloc, err := s.State().AllocByID(nil, args.AllocID)
	if err != nil {
		return nil, err
	}
	if alloc == nil || alloc.NodeID != args.NodeID || alloc.Job == nil {
		return nil, structs.NewError(structs.ErrPermissionDenied, "Permission denied: allocation %q is not this node's", args.AllocID)
	}
	ns := allocNamespaceOf(alloc)
	allowed := structs.TaskVariablePaths(alloc.JobID, alloc.TaskGroup, args.Task)
	wait := args.MaxWait
	if wait <= 0 {
		wait = defaultTaskVarWait
	}
	ctx, cancel := context.WithTimeout(ctx, min(wait, maxTaskVarWait))
	defer cancel()
	var found []*structs.VariableEncrypted
	index, err := s.State().BlockingQuery(ctx, args.MinIndex, func(ws memdb.WatchSet, st *state.StateStore) (uint64, error) {
		found = found[:0]
		if args.List {
			vars, err := st.Variables(ws, ns, args.Prefix)
			if err != nil {
				return 0, err
			}
			for _, v := range vars {
				if slices.Contains(allowed, v.Path) {
					found = append(found, v)
				}
			}
		} else if slices.Contains(allowed, strings.Trim(args.Path, "/")) {
			v, err := st.VariableByPath(ws, ns, strings.Trim(args.Path, "/"))
			if err != nil {
				return 0, err
			}
			if v != nil {
				found = append(found, v)
			}
		}
		return max(st.Index(state.TableVariables), 1), nil
	})
	if err != nil && ctx.Err() == nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err // the caller went away
	}
	reply := &structs.VariableTaskReadReply{Index: index}
	now := ep.Now()
	for _, v := range found {
		if args.List {
			reply.List = append(reply.List, v.Metadata(now))
			continue
		}
		if reply.Var, err = ep.Open(v, false); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

func allocNamespaceOf(a *structs.Allocation) string {
	switch {
	case a.Namespace != "":
		return a.Namespace
	case a.Job != nil && a.Job.Namespace != "":
		return a.Job.Namespace
	}
	return structs.DefaultNamespace
}

// LookupVariables is Variables().TaskRead, for a client in this agent.
func (c ClientConn) LookupVariables(ctx context.Context, args *structs.VariableTaskReadArgs) (*structs.VariableTaskReadReply, error) {
	return c.srv.Variables().TaskRead(ctx, args)
}

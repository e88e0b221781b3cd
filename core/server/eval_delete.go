package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/rpc"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// evalDeleteBatch bounds one Raft entry of an eval delete, so that a
// filter that matches a large backlog never makes one long apply.
const evalDeleteBatch = 1024

// EvalDeleteArgs is the RPC argument of Eval.Delete.
type EvalDeleteArgs struct {
	EvalIDs []string
	Filter  string
}

// registerEvalRPC exposes eval deletes, which followers forward to the
// leader. Absent from rpcAccess: server-only.
func (s *Server) registerEvalRPC(rs *rpc.Server, mark func(context.Context) context.Context) {
	rpc.Handle(rs, "Eval.Delete", func(ctx context.Context, a *EvalDeleteArgs) (*structs.EvalDeleteResponse, error) {
		return s.DeleteEvals(mark(ctx), a.EvalIDs, a.Filter)
	})
}

// DeleteEvals deletes evaluations by ID or by filter (DELETE
// /v1/evaluations, `nomad eval delete`), in Raft entries of at most
// evalDeleteBatch evals.
//
// As in Nomad, evals are deleted only while the eval broker is paused
// (the scheduler configuration's PauseEvalBroker; otherwise a 400 "eval
// broker is enabled; eval broker must be paused to delete evals"), so
// that no worker takes up an eval being deleted. An eval may then be
// deleted, whatever its status, unless a worker still holds it (delivered
// before the pause) or its job is live (neither purged, stopped nor dead)
// and one of its allocations is not terminal on its client. An eval named
// by ID that the rule keeps refuses the whole request (400, naming it and
// why), and so does one that does not exist (404 "eval not found"); a
// filter skips the evals the rule keeps. Deleted evals leave the broker
// and the blocked-eval tracker too.
func (s *Server) DeleteEvals(ctx context.Context, ids []string, filter string) (*structs.EvalDeleteResponse, error) {
	if r, ok, err := forward[EvalDeleteArgs, structs.EvalDeleteResponse](ctx, s, "Eval.Delete", &EvalDeleteArgs{EvalIDs: ids, Filter: filter}); ok {
		return r, err
	}
	switch {
	case len(ids) > 0 && filter != "":
		return nil, structs.NewError(structs.ErrInvalid, "EvalIDs and Filter: evals are deleted by ID or by filter, not both")
	case len(ids) == 0 && filter == "":
		return nil, structs.NewError(structs.ErrInvalid, "EvalIDs or Filter: one is required")
	case len(ids) > structs.MaxEvalIDsPerDelete:
		return nil, structs.NewError(structs.ErrInvalid, "EvalIDs: %d IDs, more than %d per request", len(ids), structs.MaxEvalIDsPerDelete)
	case len(filter) > structs.MaxEvalDeleteFilterBytes:
		return nil, structs.NewError(structs.ErrInvalid, "Filter: %d bytes, more than %d", len(filter), structs.MaxEvalDeleteFilterBytes)
	}
	var match func(*structs.Evaluation) bool
	if filter != "" {
		var err error
		if match, err = parseEvalFilter(filter); err != nil {
			return nil, err
		}
	}
	if !s.broker.Paused() {
		return nil, structs.NewError(structs.ErrInvalid, "eval broker is enabled; eval broker must be paused to delete evals (set PauseEvalBroker in the scheduler configuration)")
	}
	st := s.State()
	var doomed []string
	if filter != "" {
		evals, err := st.EvalList(nil, state.AllNamespaces, "")
		if err != nil {
			return nil, err
		}
		for _, e := range evals {
			if !match(e) {
				continue
			}
			if why, err := s.evalKept(st, e); err != nil {
				return nil, err
			} else if why == "" {
				doomed = append(doomed, e.ID)
			}
		}
	} else {
		seen := make(map[string]bool, len(ids))
		for i, id := range ids {
			if len(id) > structs.MaxIdentifierBytes {
				return nil, structs.NewError(structs.ErrInvalid, "EvalIDs[%d]: %d bytes, more than %d", i, len(id), structs.MaxIdentifierBytes)
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			e, err := st.EvalByID(nil, id)
			if err != nil {
				return nil, err
			}
			if e == nil {
				return nil, structs.NewError(structs.ErrNotFound, "EvalIDs[%d]: eval not found: %s", i, id)
			}
			why, err := s.evalKept(st, e)
			if err != nil {
				return nil, err
			}
			if why != "" {
				return nil, structs.NewError(structs.ErrInvalid, "EvalIDs[%d]: eval %s cannot be deleted: %s", i, id, why)
			}
			doomed = append(doomed, id)
		}
	}
	resp := &structs.EvalDeleteResponse{}
	for len(doomed) > 0 {
		n := min(len(doomed), evalDeleteBatch)
		idx, err := s.raftApply(structs.EvalDeleteRequestType, &structs.EvalDeleteRequest{Evals: doomed[:n]})
		if err != nil {
			return resp, err
		}
		// Nothing may schedule or cancel (write again) a deleted eval.
		// An eval delivered since the check above is the worker's: its
		// result writes it back, as Nomad's would.
		s.broker.Drop(doomed[:n])
		s.blocked.Drop(doomed[:n])
		resp.Count += n
		resp.Index = idx
		doomed = doomed[n:]
	}
	s.logger.Info("evals deleted", "count", resp.Count, "by_filter", filter != "", "index", resp.Index)
	return resp, nil
}

// evalKept says why eval e must stay ("" when it may be deleted): a
// worker holds it, or its job is live and one of its allocations is not
// terminal on its client.
func (s *Server) evalKept(st *state.StateStore, e *structs.Evaluation) (string, error) {
	if _, held := s.broker.Outstanding(e.ID); held {
		return "a scheduler worker holds it (delivered before the broker was paused); retry once it is done", nil
	}
	job, err := st.JobByID(nil, e.Namespace, e.JobID)
	if err != nil {
		return "", err
	}
	if job == nil || job.Stop || job.Status == structs.JobStatusDead {
		return "", nil
	}
	allocs, err := st.AllocsByEval(nil, e.ID)
	if err != nil {
		return "", err
	}
	for _, a := range allocs {
		if !a.ClientTerminalStatus() {
			return fmt.Sprintf("its job is live and its allocation %s is %s", a.ID, a.ClientStatus), nil
		}
	}
	return "", nil
}

// evalFilterFields are the fields an eval delete filter may compare.
var evalFilterFields = map[string]func(*structs.Evaluation) string{
	"ID":                func(e *structs.Evaluation) string { return e.ID },
	"Namespace":         func(e *structs.Evaluation) string { return e.Namespace },
	"JobID":             func(e *structs.Evaluation) string { return e.JobID },
	"Status":            func(e *structs.Evaluation) string { return e.Status },
	"StatusDescription": func(e *structs.Evaluation) string { return e.StatusDescription },
	"Type":              func(e *structs.Evaluation) string { return e.Type },
	"TriggeredBy":       func(e *structs.Evaluation) string { return e.TriggeredBy },
	"NodeID":            func(e *structs.Evaluation) string { return e.NodeID },
	"DeploymentID":      func(e *structs.Evaluation) string { return e.DeploymentID },
}

// parseEvalFilter reads the subset of Nomad's filter language (go-bexpr)
// that eval deletes take in drover: comparisons `Field == "value"` and
// `Field != "value"` over evalFilterFields, joined by "and". Anything else
// is refused naming the clause, rather than guessed at: a filter that
// matched more than its author meant would delete too much.
func parseEvalFilter(filter string) (func(*structs.Evaluation) bool, error) {
	type clause struct {
		field func(*structs.Evaluation) string
		eq    bool
		value string
	}
	var clauses []clause
	for i, raw := range strings.Split(filter, " and ") {
		text := strings.TrimSpace(raw)
		op, eq := "==", true
		lhs, rhs, ok := strings.Cut(text, "==")
		if !ok {
			op, eq = "!=", false
			lhs, rhs, ok = strings.Cut(text, "!=")
		}
		if !ok {
			return nil, structs.NewError(structs.ErrInvalid, "Filter: clause %d %q: want Field == \"value\" or Field != \"value\", joined by \"and\"", i+1, text)
		}
		name := strings.TrimSpace(lhs)
		field, known := evalFilterFields[name]
		if !known {
			return nil, structs.NewError(structs.ErrInvalid, "Filter: clause %d: unknown field %q (supported: ID, Namespace, JobID, Status, StatusDescription, Type, TriggeredBy, NodeID, DeploymentID)", i+1, name)
		}
		value, err := strconv.Unquote(strings.TrimSpace(rhs))
		if err != nil {
			return nil, structs.NewError(structs.ErrInvalid, "Filter: clause %d: the value after %s must be a double-quoted string: %s", i+1, op, strings.TrimSpace(rhs))
		}
		clauses = append(clauses, clause{field: field, eq: eq, value: value})
	}
	return func(e *structs.Evaluation) bool {
		for _, c := range clauses {
			if (c.field(e) == c.value) != c.eq {
				return false
			}
		}
		return true
	}, nil
}

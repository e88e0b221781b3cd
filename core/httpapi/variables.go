package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// variableHandlers serves Nomad Variables (/v1/vars, /v1/var/<path>) and
// the keyring (/v1/operator/keyring/*).
type variableHandlers struct{ *HTTPServer }

// VariablesAPI (Config.Variables) writes variables and opens the sealed
// ones the state store holds. Write returns the variable as stored, or
// conflict (the current variable) with an error of kind
// structs.ErrConflict when a CAS or lock check lost.
type VariablesAPI interface {
	Write(ctx context.Context, op string, v *structs.Variable, cas *uint64, lockID string) (out, conflict *structs.Variable, index uint64, err error)
	Open(v *structs.VariableEncrypted, withLockID bool) (*structs.Variable, error)
	Now() time.Time
	Keys(ctx context.Context) ([]*structs.RootKeyMeta, uint64, error)
	DeleteKey(ctx context.Context, keyID string, force bool) (uint64, error)
	Rotate(ctx context.Context, full bool) (*structs.RootKeyMeta, uint64, error)
}

// varReader is what the variable reads need of the state store.
type varReader interface {
	VariableByPath(ws memdb.WatchSet, ns, path string) (*structs.VariableEncrypted, error)
	Variables(ws memdb.WatchSet, ns, prefix string) ([]*structs.VariableEncrypted, error)
}

// allowVar reports whether the caller has capability on ns/path (ACLs
// off: yes).
func allowVar(r *http.Request, ns, path, capability string) bool {
	a := requestACL(r)
	return a == nil || a.AllowVariableOperation(ns, path, capability)
}

// varPathRule requires capability on the variable the path names, in the
// request's namespace.
func varPathRule(capability string) rule {
	return rule{need: "variables:" + capability, allow: func(a *acl.ACL, r *http.Request) bool {
		return a.AllowVariableOperation(namespaceOf("", r), structs.CleanVariablePath(r.PathValue("path")), capability)
	}}
}

var (
	varRead    = varPathRule(acl.VariablesCapabilityRead)
	varDestroy = varPathRule(acl.VariablesCapabilityDestroy)
	// varList needs list somewhere in the namespace ("*": anywhere); the
	// rows are filtered path by path.
	varList = rule{need: "variables:list", allow: func(a *acl.ACL, r *http.Request) bool {
		ns := r.URL.Query().Get("namespace")
		switch ns {
		case "":
			ns = structs.DefaultNamespace
		case "*":
			return true
		}
		return a.AllowVariableSearch(ns)
	}}
	// varWrite: the namespace may come from the body; checked in the
	// handler (write for set and locks, destroy for deletes).
	varWrite = rule{need: "variables:write", allow: func(*acl.ACL, *http.Request) bool { return true }}
)

func (s variableHandlers) api(w http.ResponseWriter) (VariablesAPI, bool) {
	if s.variables == nil || s.srv == nil {
		writeText(w, http.StatusNotImplemented, "This agent's server does not serve variables")
		return nil, false
	}
	return s.variables, true
}

// varList is GET /v1/vars: the metadata of the variables of ?namespace
// ("*": every namespace) whose path starts with ?prefix, those the
// caller may list, by namespace and path; ?per_page and ?next_token
// ("<namespace>.<path>" of the first row of the next page, answered in
// X-Nomad-NextToken) page it.
func (s variableHandlers) varList(w http.ResponseWriter, r *http.Request) {
	api, ok := s.api(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	perPage := 0
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.writeError(w, badRequest("per_page: %q is not a non-negative integer", v))
			return
		}
		perPage = min(n, structs.MaxVariablesListPerPage)
	}
	next := q.Get("next_token")
	if len(next) > structs.MaxVariablePathLength+structs.MaxIdentifierBytes+1 {
		s.writeError(w, badRequest("next_token: longer than %d bytes", structs.MaxVariablePathLength+structs.MaxIdentifierBytes+1))
		return
	}
	ns := q.Get("namespace")
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	a := requestACL(r)
	now := api.Now()
	readListExact(s.HTTPServer, w, r, state.TableVariables, func(l []*structs.VariableMetadata) any { return l },
		func(ws memdb.WatchSet, st reader, qo queryOptions) ([]*structs.VariableMetadata, error) {
			vr, ok := st.(varReader)
			if !ok {
				return nil, structs.NewError(structs.ErrUnavailable, "this agent's state store holds no variables")
			}
			vars, err := vr.Variables(ws, ns, qo.Prefix)
			if err != nil {
				return nil, err
			}
			w.Header().Del(headerNextToken)
			out := make([]*structs.VariableMetadata, 0, len(vars))
			for _, v := range vars {
				if next != "" && v.Namespace+"."+v.Path < next {
					continue
				}
				if a != nil && !a.AllowVariableOperation(v.Namespace, v.Path, acl.VariablesCapabilityList) {
					continue
				}
				if perPage > 0 && len(out) == perPage {
					w.Header().Set(headerNextToken, v.Namespace+"."+v.Path)
					break
				}
				out = append(out, v.Metadata(now))
			}
			return out, nil
		})
}

// varGet is GET /v1/var/<path>: the variable with its items.
func (s variableHandlers) varGet(w http.ResponseWriter, r *http.Request) {
	api, ok := s.api(w)
	if !ok {
		return
	}
	ns, path := namespaceOf("", r), structs.CleanVariablePath(r.PathValue("path"))
	if err := structs.ValidateVariablePath(path); err != nil {
		s.writeError(w, err)
		return
	}
	s.blockingRead(w, r, func(queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			vr, ok := st.(varReader)
			if !ok {
				return 0, nil, structs.NewError(structs.ErrUnavailable, "this agent's state store holds no variables")
			}
			v, err := vr.VariableByPath(ws, ns, path)
			if err != nil {
				return 0, nil, err
			}
			if v == nil {
				return st.Index(state.TableVariables), notFound("variable not found"), nil
			}
			out, err := api.Open(v, false)
			if err != nil {
				return 0, nil, err
			}
			return v.ModifyIndex, out, nil
		}
	})
}

// varPut is PUT /v1/var/<path>: a write (?cas=<index>: only if the
// stored variable is at that index, 0: only if there is none), or with
// ?lock-acquire, ?lock-renew or ?lock-release a lock operation, as Nomad
// 1.7's. A lost check answers 409 with the current variable (its items
// only to a caller that may read it).
func (s variableHandlers) varPut(w http.ResponseWriter, r *http.Request) {
	api, ok := s.api(w)
	if !ok {
		return
	}
	var v structs.Variable
	if err := decodeBody(r, &v); err != nil {
		s.writeError(w, err)
		return
	}
	path := structs.CleanVariablePath(r.PathValue("path"))
	if body := structs.CleanVariablePath(v.Path); body != "" && body != path {
		writeText(w, http.StatusBadRequest, "Path: the body names "+quoteBounded(v.Path)+", the request path "+quoteBounded(path))
		return
	}
	v.Path = path
	if ns := r.URL.Query().Get("namespace"); ns != "" && ns != state.AllNamespaces {
		v.Namespace = ns
	} else if v.Namespace == "" {
		v.Namespace = structs.DefaultNamespace
	}
	q := r.URL.Query()
	op := structs.VarOpSet
	for _, o := range []string{structs.VarOpLockAcquire, structs.VarOpLockRenew, structs.VarOpLockRelease} {
		if q.Has(o) {
			if op != structs.VarOpSet {
				writeText(w, http.StatusBadRequest, "only one of lock-acquire, lock-renew and lock-release may be given")
				return
			}
			op = o
		}
	}
	if !allowVar(r, v.Namespace, v.Path, acl.VariablesCapabilityWrite) {
		s.writeError(w, errPermissionDenied)
		return
	}
	cas, err := parseCAS(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	lockID := ""
	if v.Lock != nil {
		lockID = v.Lock.ID
	}
	if op == structs.VarOpLockAcquire && lockID != "" {
		writeText(w, http.StatusBadRequest, "Lock.ID: set by the server on lock-acquire")
		return
	}
	out, conflict, idx, err := api.Write(r.Context(), op, &v, cas, lockID)
	if err != nil {
		s.writeVarError(w, r, conflict, err)
		return
	}
	if out == nil {
		writeText(w, http.StatusInternalServerError, "variable write: the variable was not read back")
		return
	}
	if op == structs.VarOpLockRenew {
		writeWrite(w, r, idx, out.Metadata())
		return
	}
	writeWrite(w, r, idx, out)
}

// varDelete is DELETE /v1/var/<path>[?cas=<index>]: 204, or 409 with the
// current variable.
func (s variableHandlers) varDelete(w http.ResponseWriter, r *http.Request) {
	api, ok := s.api(w)
	if !ok {
		return
	}
	cas, err := parseCAS(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	v := &structs.Variable{Namespace: namespaceOf("", r), Path: structs.CleanVariablePath(r.PathValue("path"))}
	_, conflict, idx, err := api.Write(r.Context(), structs.VarOpDelete, v, cas, r.URL.Query().Get("lock-id"))
	if err != nil {
		s.writeVarError(w, r, conflict, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusNoContent)
}

func (s variableHandlers) writeVarError(w http.ResponseWriter, r *http.Request, conflict *structs.Variable, err error) {
	if conflict == nil || structs.HTTPStatus(err) != http.StatusConflict {
		s.writeError(w, err)
		return
	}
	if !allowVar(r, conflict.Namespace, conflict.Path, acl.VariablesCapabilityRead) {
		conflict.Items = nil
	}
	w.Header().Set(headerIndex, uintText(max(conflict.ModifyIndex, 1)))
	writeJSON(w, r, http.StatusConflict, conflict)
}

func parseCAS(r *http.Request) (*uint64, error) {
	v := r.URL.Query().Get("cas")
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return nil, badRequest("cas: %q is not an index", v)
	}
	return &n, nil
}

// keyringList is GET /v1/operator/keyring/keys: the root keys' metadata.
func (s variableHandlers) keyringList(w http.ResponseWriter, r *http.Request) {
	api, ok := s.api(w)
	if !ok {
		return
	}
	keys, idx, err := api.Keys(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.setReadHeaders(w, max(idx, 1))
	writeJSON(w, r, http.StatusOK, keys)
}

// keyringRotate is PUT /v1/operator/keyring/rotate[?full=true]: a new
// active root key; with full, every variable re-sealed under it.
func (s variableHandlers) keyringRotate(w http.ResponseWriter, r *http.Request) {
	api, ok := s.api(w)
	if !ok {
		return
	}
	full, err := parseBool(r, "full")
	if err != nil {
		s.writeError(w, err)
		return
	}
	if q := r.URL.Query().Get("algo"); q != "" && q != structs.RootKeyAlgorithmAES256GCM {
		s.writeError(w, badRequest("algo: %q is not supported; the algorithm is %s", q, structs.RootKeyAlgorithmAES256GCM))
		return
	}
	key, idx, err := api.Rotate(r.Context(), full)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, map[string]any{"Key": key, "Index": idx})
}

// keyringDelete is DELETE /v1/operator/keyring/key/{id}[?force=true]: an
// inactive key; one that still seals variables only with force.
func (s variableHandlers) keyringDelete(w http.ResponseWriter, r *http.Request) {
	api, ok := s.api(w)
	if !ok {
		return
	}
	force, err := parseBool(r, "force")
	if err != nil {
		s.writeError(w, err)
		return
	}
	idx, err := api.DeleteKey(r.Context(), r.PathValue("id"), force)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusOK)
}

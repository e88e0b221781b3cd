package httpapi

import (
	"context"
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// ACLRoleServer serves ACL roles. The ACLCRUD server implements it when
// it has roles; each method authorizes its caller (management for writes,
// a token may read the roles it holds), so the routes are
// self-authorizing.
type ACLRoleServer interface {
	UpsertACLRoles(ctx context.Context, secret string, roles []*structs.ACLRole) ([]*structs.ACLRole, uint64, error)
	DeleteACLRoles(ctx context.Context, secret string, ids []string) (uint64, error)
	ListACLRoles(ctx context.Context, secret, prefix string) ([]*structs.ACLRoleListStub, uint64, error)
	GetACLRole(ctx context.Context, secret, key string, byName bool) (*structs.ACLRole, uint64, error)
}

func (s aclHandlers) aclRoles(w http.ResponseWriter) (ACLRoleServer, bool) {
	as, ok := s.aclCRUD(w)
	if !ok {
		return nil, false
	}
	rs, ok := as.(ACLRoleServer)
	if !ok {
		writeText(w, http.StatusNotImplemented, "ACL roles are not supported by this server")
		return nil, false
	}
	return rs, true
}

func (s aclHandlers) aclRoleList(w http.ResponseWriter, r *http.Request) {
	if rs, ok := s.aclRoles(w); ok {
		list, idx, err := rs.ListACLRoles(r.Context(), requestToken(r), r.URL.Query().Get("prefix"))
		s.aclRead(w, r, list, idx, err)
	}
}

func (s aclHandlers) aclRoleGet(w http.ResponseWriter, r *http.Request) {
	if rs, ok := s.aclRoles(w); ok {
		role, idx, err := rs.GetACLRole(r.Context(), requestToken(r), r.PathValue("id"), false)
		s.aclRead(w, r, role, idx, err)
	}
}

func (s aclHandlers) aclRoleGetByName(w http.ResponseWriter, r *http.Request) {
	if rs, ok := s.aclRoles(w); ok {
		role, idx, err := rs.GetACLRole(r.Context(), requestToken(r), r.PathValue("name"), true)
		s.aclRead(w, r, role, idx, err)
	}
}

// aclRoleCreate is PUT /v1/acl/role: a new role; an ID in the body is
// refused (that is an update, on the role's own path).
func (s aclHandlers) aclRoleCreate(w http.ResponseWriter, r *http.Request) {
	s.aclRoleWrite(w, r, "")
}

// aclRoleUpdate is PUT /v1/acl/role/{id}.
func (s aclHandlers) aclRoleUpdate(w http.ResponseWriter, r *http.Request) {
	s.aclRoleWrite(w, r, r.PathValue("id"))
}

func (s aclHandlers) aclRoleWrite(w http.ResponseWriter, r *http.Request, id string) {
	rs, ok := s.aclRoles(w)
	if !ok {
		return
	}
	var role structs.ACLRole
	if err := decodeBody(r, &role); err != nil {
		s.writeError(w, err)
		return
	}
	switch {
	case id == "" && role.ID != "":
		writeText(w, http.StatusBadRequest, "ID: set by the server on create; update a role at /v1/acl/role/<id>")
		return
	case id != "" && role.ID == "":
		role.ID = id
	case id != "" && role.ID != id:
		writeText(w, http.StatusBadRequest, "ID: the body names role "+quoteBounded(role.ID)+", the path "+quoteBounded(id))
		return
	}
	roles, idx, err := rs.UpsertACLRoles(r.Context(), requestToken(r), []*structs.ACLRole{&role})
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(roles) != 1 {
		writeText(w, http.StatusInternalServerError, "ACL role write: the role was not read back")
		return
	}
	writeWrite(w, r, idx, roles[0])
}

func (s aclHandlers) aclRoleDelete(w http.ResponseWriter, r *http.Request) {
	rs, ok := s.aclRoles(w)
	if !ok {
		return
	}
	idx, err := rs.DeleteACLRoles(r.Context(), requestToken(r), []string{r.PathValue("id")})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusOK)
}

package httpapi

import (
	"context"
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// ACLAuthServer serves ACL auth methods, binding rules and logins. The
// ACLCRUD server implements it when it has them; each method authorizes
// its caller (management for everything but the method listing and the
// login), so the routes are self-authorizing.
type ACLAuthServer interface {
	CreateACLAuthMethods(ctx context.Context, secret string, methods []*structs.ACLAuthMethod) ([]*structs.ACLAuthMethod, uint64, error)
	UpsertACLAuthMethods(ctx context.Context, secret string, methods []*structs.ACLAuthMethod) ([]*structs.ACLAuthMethod, uint64, error)
	DeleteACLAuthMethods(ctx context.Context, secret string, names []string) (uint64, error)
	ListACLAuthMethods(ctx context.Context, secret string) ([]*structs.ACLAuthMethodListStub, uint64, error)
	GetACLAuthMethod(ctx context.Context, secret, name string) (*structs.ACLAuthMethod, uint64, error)
	UpsertACLBindingRules(ctx context.Context, secret string, rules []*structs.ACLBindingRule) ([]*structs.ACLBindingRule, uint64, error)
	DeleteACLBindingRules(ctx context.Context, secret string, ids []string) (uint64, error)
	ListACLBindingRules(ctx context.Context, secret, prefix string) ([]*structs.ACLBindingRuleListStub, uint64, error)
	GetACLBindingRule(ctx context.Context, secret, id string) (*structs.ACLBindingRule, uint64, error)
	Login(ctx context.Context, authMethod, loginToken string) (*structs.ACLToken, uint64, error)
}

func (s aclHandlers) aclAuth(w http.ResponseWriter) (ACLAuthServer, bool) {
	as, ok := s.aclCRUD(w)
	if !ok {
		return nil, false
	}
	au, ok := as.(ACLAuthServer)
	if !ok {
		writeText(w, http.StatusNotImplemented, "ACL auth methods are not supported by this server")
		return nil, false
	}
	return au, true
}

func (s aclHandlers) aclAuthMethodList(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclAuth(w); ok {
		list, idx, err := as.ListACLAuthMethods(r.Context(), requestToken(r))
		s.aclRead(w, r, list, idx, err)
	}
}

func (s aclHandlers) aclAuthMethodGet(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclAuth(w); ok {
		m, idx, err := as.GetACLAuthMethod(r.Context(), requestToken(r), r.PathValue("name"))
		s.aclRead(w, r, m, idx, err)
	}
}

// aclAuthMethodCreate is PUT /v1/acl/auth-method: a new method; a name
// already taken is refused.
func (s aclHandlers) aclAuthMethodCreate(w http.ResponseWriter, r *http.Request) {
	s.aclAuthMethodWrite(w, r, "")
}

// aclAuthMethodUpdate is PUT /v1/acl/auth-method/{name}: the method must
// exist.
func (s aclHandlers) aclAuthMethodUpdate(w http.ResponseWriter, r *http.Request) {
	s.aclAuthMethodWrite(w, r, r.PathValue("name"))
}

func (s aclHandlers) aclAuthMethodWrite(w http.ResponseWriter, r *http.Request, name string) {
	as, ok := s.aclAuth(w)
	if !ok {
		return
	}
	var m structs.ACLAuthMethod
	if err := decodeBody(r, &m); err != nil {
		s.writeError(w, err)
		return
	}
	switch {
	case name != "" && m.Name == "":
		m.Name = name
	case name != "" && m.Name != name:
		writeText(w, http.StatusBadRequest, "Name: the body names auth method "+quoteBounded(m.Name)+", the path "+quoteBounded(name))
		return
	}
	write := as.UpsertACLAuthMethods
	if name == "" {
		write = as.CreateACLAuthMethods
	}
	out, idx, err := write(r.Context(), requestToken(r), []*structs.ACLAuthMethod{&m})
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(out) != 1 {
		writeText(w, http.StatusInternalServerError, "ACL auth method write: the method was not read back")
		return
	}
	writeWrite(w, r, idx, out[0])
}

func (s aclHandlers) aclAuthMethodDelete(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclAuth(w)
	if !ok {
		return
	}
	idx, err := as.DeleteACLAuthMethods(r.Context(), requestToken(r), []string{r.PathValue("name")})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusOK)
}

func (s aclHandlers) aclBindingRuleList(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclAuth(w); ok {
		list, idx, err := as.ListACLBindingRules(r.Context(), requestToken(r), r.URL.Query().Get("prefix"))
		s.aclRead(w, r, list, idx, err)
	}
}

func (s aclHandlers) aclBindingRuleGet(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclAuth(w); ok {
		rule, idx, err := as.GetACLBindingRule(r.Context(), requestToken(r), r.PathValue("id"))
		s.aclRead(w, r, rule, idx, err)
	}
}

// aclBindingRuleCreate is PUT /v1/acl/binding-rule: a new rule; an ID in
// the body is refused.
func (s aclHandlers) aclBindingRuleCreate(w http.ResponseWriter, r *http.Request) {
	s.aclBindingRuleWrite(w, r, "")
}

// aclBindingRuleUpdate is PUT /v1/acl/binding-rule/{id}.
func (s aclHandlers) aclBindingRuleUpdate(w http.ResponseWriter, r *http.Request) {
	s.aclBindingRuleWrite(w, r, r.PathValue("id"))
}

func (s aclHandlers) aclBindingRuleWrite(w http.ResponseWriter, r *http.Request, id string) {
	as, ok := s.aclAuth(w)
	if !ok {
		return
	}
	var rule structs.ACLBindingRule
	if err := decodeBody(r, &rule); err != nil {
		s.writeError(w, err)
		return
	}
	switch {
	case id == "" && rule.ID != "":
		writeText(w, http.StatusBadRequest, "ID: set by the server on create; update a rule at /v1/acl/binding-rule/<id>")
		return
	case id != "" && rule.ID == "":
		rule.ID = id
	case id != "" && rule.ID != id:
		writeText(w, http.StatusBadRequest, "ID: the body names binding rule "+quoteBounded(rule.ID)+", the path "+quoteBounded(id))
		return
	}
	out, idx, err := as.UpsertACLBindingRules(r.Context(), requestToken(r), []*structs.ACLBindingRule{&rule})
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(out) != 1 {
		writeText(w, http.StatusInternalServerError, "ACL binding rule write: the rule was not read back")
		return
	}
	writeWrite(w, r, idx, out[0])
}

func (s aclHandlers) aclBindingRuleDelete(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclAuth(w)
	if !ok {
		return
	}
	idx, err := as.DeleteACLBindingRules(r.Context(), requestToken(r), []string{r.PathValue("id")})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusOK)
}

// aclLogin is PUT/POST /v1/acl/login: a JWT for an ACL token. It needs no
// token; the answer holds the new token's secret and is never cached.
func (s aclHandlers) aclLogin(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclAuth(w)
	if !ok {
		return
	}
	var req structs.ACLLoginRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	tok, idx, err := as.Login(r.Context(), req.AuthMethodName, req.LoginToken)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeWrite(w, r, idx, tok)
}

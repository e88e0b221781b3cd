package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/drover-org/drover/core/structs"
)

// ACLCRUDServer (Config.ACLCRUD) serves ACL policies and tokens. Each
// method authorizes its caller from the secret it is given (management
// for writes and token lists; a client token may read itself and the
// policies it holds), so these routes are self-authorizing.
type ACLCRUDServer interface {
	UpsertACLPolicies(ctx context.Context, secret string, policies []*structs.ACLPolicy) (uint64, error)
	DeleteACLPolicies(ctx context.Context, secret string, names []string) (uint64, error)
	ListACLPolicies(ctx context.Context, secret, prefix string) ([]*structs.ACLPolicyListStub, uint64, error)
	GetACLPolicy(ctx context.Context, secret, name string) (*structs.ACLPolicy, uint64, error)
	UpsertACLTokens(ctx context.Context, secret string, tokens []*structs.ACLToken) ([]*structs.ACLToken, uint64, error)
	DeleteACLTokens(ctx context.Context, secret string, accessors []string) (uint64, error)
	ListACLTokens(ctx context.Context, secret, prefix string) ([]*structs.ACLTokenListStub, uint64, error)
	GetACLToken(ctx context.Context, secret, accessor string) (*structs.ACLToken, uint64, error)
	ACLTokenSelf(ctx context.Context, secret string) (*structs.ACLToken, uint64, error)
}

func (s aclHandlers) aclCRUD(w http.ResponseWriter) (ACLCRUDServer, bool) {
	as := s.aclCRUDs
	if as == nil || s.srv == nil {
		writeText(w, http.StatusBadRequest, "ACL support disabled")
		return nil, false
	}
	return as, true
}

// aclRead answers a read of the ACL tables; secrets are never cached.
func (s aclHandlers) aclRead(w http.ResponseWriter, r *http.Request, body any, idx uint64, err error) {
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.setReadHeaders(w, max(idx, 1))
	writeJSON(w, r, http.StatusOK, body)
}

func (s aclHandlers) aclPolicyList(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclCRUD(w); ok {
		list, idx, err := as.ListACLPolicies(r.Context(), requestToken(r), r.URL.Query().Get("prefix"))
		s.aclRead(w, r, list, idx, err)
	}
}

func (s aclHandlers) aclPolicyGet(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclCRUD(w); ok {
		p, idx, err := as.GetACLPolicy(r.Context(), requestToken(r), r.PathValue("name"))
		s.aclRead(w, r, p, idx, err)
	}
}

// aclPolicyUpsert is PUT /v1/acl/policy/{name} with the ACLPolicy as the
// body; the body's name, when given, must be the path's.
func (s aclHandlers) aclPolicyUpsert(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclCRUD(w)
	if !ok {
		return
	}
	var p structs.ACLPolicy
	if err := decodeBody(r, &p); err != nil {
		s.writeError(w, err)
		return
	}
	name := r.PathValue("name")
	if p.Name == "" {
		p.Name = name
	}
	if p.Name != name {
		writeText(w, http.StatusBadRequest, "Name: the body names policy "+quoteBounded(p.Name)+", the path "+quoteBounded(name))
		return
	}
	idx, err := as.UpsertACLPolicies(r.Context(), requestToken(r), []*structs.ACLPolicy{&p})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusOK)
}

func (s aclHandlers) aclPolicyDelete(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclCRUD(w)
	if !ok {
		return
	}
	idx, err := as.DeleteACLPolicies(r.Context(), requestToken(r), []string{r.PathValue("name")})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusOK)
}

func (s aclHandlers) aclTokenList(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclCRUD(w); ok {
		list, idx, err := as.ListACLTokens(r.Context(), requestToken(r), r.URL.Query().Get("prefix"))
		s.aclRead(w, r, list, idx, err)
	}
}

func (s aclHandlers) aclTokenSelf(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclCRUD(w); ok {
		tok, idx, err := as.ACLTokenSelf(r.Context(), requestToken(r))
		s.aclRead(w, r, tok, idx, err)
	}
}

func (s aclHandlers) aclTokenGet(w http.ResponseWriter, r *http.Request) {
	if as, ok := s.aclCRUD(w); ok {
		tok, idx, err := as.GetACLToken(r.Context(), requestToken(r), r.PathValue("accessor"))
		s.aclRead(w, r, tok, idx, err)
	}
}

// aclTokenCreate is PUT /v1/acl/token: a new token; an AccessorID in the
// body is refused (that is an update, on the token's own path).
func (s aclHandlers) aclTokenCreate(w http.ResponseWriter, r *http.Request) {
	s.aclTokenWrite(w, r, "")
}

// aclTokenUpdate is PUT /v1/acl/token/{accessor}.
func (s aclHandlers) aclTokenUpdate(w http.ResponseWriter, r *http.Request) {
	s.aclTokenWrite(w, r, r.PathValue("accessor"))
}

func (s aclHandlers) aclTokenWrite(w http.ResponseWriter, r *http.Request, accessor string) {
	as, ok := s.aclCRUD(w)
	if !ok {
		return
	}
	var t structs.ACLToken
	if err := decodeBody(r, &t); err != nil {
		s.writeError(w, err)
		return
	}
	switch {
	case accessor == "" && t.AccessorID != "":
		writeText(w, http.StatusBadRequest, "AccessorID: set by the server on create; update a token at /v1/acl/token/<accessor>")
		return
	case accessor != "" && t.AccessorID == "":
		t.AccessorID = accessor
	case accessor != "" && t.AccessorID != accessor:
		writeText(w, http.StatusBadRequest, "AccessorID: the body names token "+quoteBounded(t.AccessorID)+", the path "+quoteBounded(accessor))
		return
	}
	if accessor == "" && t.SecretID != "" {
		writeText(w, http.StatusBadRequest, "SecretID: set by the server; it cannot be chosen")
		return
	}
	toks, idx, err := as.UpsertACLTokens(r.Context(), requestToken(r), []*structs.ACLToken{&t})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeWrite(w, r, idx, toks[0])
}

func (s aclHandlers) aclTokenDelete(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclCRUD(w)
	if !ok {
		return
	}
	idx, err := as.DeleteACLTokens(r.Context(), requestToken(r), []string{r.PathValue("accessor")})
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set(headerIndex, uintText(idx))
	w.WriteHeader(http.StatusOK)
}

// quoteBounded quotes a caller's value for an error, cut at 64 bytes.
func quoteBounded(v string) string {
	if len(v) > 64 {
		v = v[:64] + "…"
	}
	return strconv.Quote(v)
}

func uintText(v uint64) string { return strconv.FormatUint(v, 10) }

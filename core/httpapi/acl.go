package httpapi

import (
	"context"
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// aclHandlers serves /v1/acl/*: the bootstrap, one-time tokens, policies and
// tokens. Its handlers reach the server through the embedded pointer.
type aclHandlers struct{ *HTTPServer }

// ACLServer (Config.ACL) serves the ACL bootstrap and one-time tokens.
// Each method authorizes its caller from the secret it is given, so these
// routes are self-authorizing; with ACLs off each answers 400 "ACL
// support disabled", as Nomad does.
type ACLServer interface {
	BootstrapACL(ctx context.Context, bootstrapSecret string) (*structs.ACLToken, uint64, error)
	UpsertOneTimeToken(ctx context.Context, callerSecret string) (*structs.OneTimeToken, uint64, error)
	ExchangeOneTimeToken(ctx context.Context, ottSecret string) (*structs.ACLToken, uint64, error)
}

func (s aclHandlers) aclServer(w http.ResponseWriter) (ACLServer, bool) {
	as := s.aclAPI
	if as == nil || s.srv == nil {
		writeText(w, http.StatusBadRequest, "ACL support disabled")
		return nil, false
	}
	return as, true
}

// aclBootstrap is PUT /v1/acl/bootstrap, with an optional body
// {"BootstrapSecret": "<uuid>"}; it answers the management token.
func (s aclHandlers) aclBootstrap(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclServer(w)
	if !ok {
		return
	}
	var body struct{ BootstrapSecret string }
	if err := decodeOptionalBody(r, &body); err != nil {
		s.writeError(w, err)
		return
	}
	tok, idx, err := as.BootstrapACL(r.Context(), body.BootstrapSecret)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeWrite(w, r, idx, tok)
}

// oneTimeTokenUpsert is PUT /v1/acl/token/onetime: a one-time token for
// the caller's own token.
func (s aclHandlers) oneTimeTokenUpsert(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclServer(w)
	if !ok {
		return
	}
	ott, idx, err := as.UpsertOneTimeToken(r.Context(), requestToken(r))
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeWrite(w, r, idx, structs.OneTimeTokenUpsertResponse{OneTimeToken: ott, Index: idx})
}

// oneTimeTokenExchange is PUT /v1/acl/token/onetime/exchange with
// {"OneTimeSecretID": "…"}; it needs no token and answers the ACL token,
// once.
func (s aclHandlers) oneTimeTokenExchange(w http.ResponseWriter, r *http.Request) {
	as, ok := s.aclServer(w)
	if !ok {
		return
	}
	var body structs.OneTimeTokenExchangeRequest
	if err := decodeBody(r, &body); err != nil {
		s.writeError(w, err)
		return
	}
	if body.OneTimeSecretID == "" {
		writeText(w, http.StatusBadRequest, "OneTimeSecretID: missing (the one-time token to exchange)")
		return
	}
	tok, idx, err := as.ExchangeOneTimeToken(r.Context(), body.OneTimeSecretID)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeWrite(w, r, idx, structs.OneTimeTokenExchangeResponse{Token: tok, Index: idx})
}

package httpapi

import (
	"context"
	"net/http"
)

// JoinTokens (Config.JoinTokens) is what a server of the cluster PKI
// serves about its join tokens. Both answers are secrets: the routes are operator-write.
type JoinTokens interface {
	JoinToken(role string) (string, error)
	RotateJoinToken(ctx context.Context, role string) (string, error)
}

// JoinTokenResponse is the answer of both join-token routes.
type JoinTokenResponse struct {
	Role  string
	Token string
}

func (s operatorHandlers) joinTokens(w http.ResponseWriter) (JoinTokens, bool) {
	jt := s.joinToks
	if jt == nil || s.srv == nil {
		writeText(w, http.StatusNotImplemented, "This agent runs no server of the cluster PKI")
		return nil, false
	}
	return jt, true
}

func (s operatorHandlers) joinTokenGet(w http.ResponseWriter, r *http.Request) {
	jt, ok := s.joinTokens(w)
	if !ok {
		return
	}
	role := r.PathValue("role")
	tok, err := jt.JoinToken(role)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, JoinTokenResponse{Role: role, Token: tok})
}

func (s operatorHandlers) joinTokenRotate(w http.ResponseWriter, r *http.Request) {
	jt, ok := s.joinTokens(w)
	if !ok {
		return
	}
	role := r.PathValue("role")
	tok, err := jt.RotateJoinToken(r.Context(), role)
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, JoinTokenResponse{Role: role, Token: tok})
}

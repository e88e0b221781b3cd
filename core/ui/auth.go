package ui

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// Where the browser keeps the token. Nomad's UI keeps it in the tab's
// session storage, so that it is forgotten when the browser session ends
// and a page's script can send it. drover's pages are read without
// script, so the token lives in a session cookie instead, which is the
// no-JavaScript equivalent: no Expires or Max-Age (the browser forgets it
// when the session ends), HttpOnly (no script, the UI's own included, can
// read it), SameSite=Strict (no other site's page can make the browser
// send it) and Secure over TLS, scoped to /ui/. Signing out deletes it.
// It holds the ACL token's secret: the one-time token of `drover ui
// -authenticate` is spent at once and never stored.

// maxLoginBody bounds the login form: a secret is a UUID.
const maxLoginBody = 16 << 10

// ottParam is the query parameter of /ui/settings/tokens that carries a
// one-time token's secret. Request logs record paths only, never the
// query, so the secret is not logged; the page answers with a redirect
// at once so it leaves the address bar and the history.
const ottParam = "ott"

type loginData struct {
	Error   string
	Notice  string
	Enabled bool
	Next    string
}

func (u *UI) aclEnabled() bool { return u.cfg.Resolver != nil && u.cfg.Resolver.ACLEnabled() }

func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	u.renderLogin(w, r, http.StatusOK, loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (u *UI) renderLogin(w http.ResponseWriter, r *http.Request, status int, d loginData) {
	d.Enabled = u.aclEnabled()
	u.render(w, r, &request{aclOn: d.Enabled}, status, &view{tmpl: "login", title: "Sign in", data: d}, time.Now())
}

// tokensPage is /ui/settings/tokens: the sign-in form, or, with
// ?ott=<secret>, the exchange of the one-time token that `drover ui
// -authenticate` printed. The exchange succeeds once; every later use of
// the same address says that the token was used or has expired.
func (u *UI) tokensPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Referrer-Policy", "no-referrer")
	qs := r.URL.Query()
	next := safeNext(qs.Get("next"))
	if !qs.Has(ottParam) {
		u.renderLogin(w, r, http.StatusOK, loginData{Next: next})
		return
	}
	secret := strings.TrimSpace(qs.Get(ottParam))
	switch {
	case !u.aclEnabled():
		u.renderLogin(w, r, http.StatusOK, loginData{Notice: "ACLs are not enabled on this cluster: the one-time token is not needed.", Next: next})
		return
	case !structs.IsUUID(secret):
		u.renderLogin(w, r, http.StatusBadRequest, loginData{Error: "The address does not hold a one-time token (its ott parameter must be a UUID). Run drover ui -authenticate again, or sign in with a token below.", Next: next})
		return
	case u.cfg.Actions == nil:
		u.renderLogin(w, r, http.StatusNotImplemented, loginData{Error: "This agent cannot exchange one-time tokens. Sign in with a token below.", Next: next})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	tok, err := u.cfg.Actions.ExchangeOneTimeToken(ctx, secret)
	switch {
	case err == nil && tok != nil && tok.SecretID != "":
	case err == nil || errors.Is(err, structs.ErrPermissionDenied) || errors.Is(err, structs.ErrNotFound):
		u.renderLogin(w, r, http.StatusForbidden, loginData{Error: "This one-time token was already used or has expired (they last ten minutes and work once). Run drover ui -authenticate again for a new one, or sign in with a token below.", Next: next})
		return
	default:
		// The error names no secret: the server words it.
		u.renderLogin(w, r, structs.HTTPStatus(err), loginData{Error: "The one-time token could not be exchanged: " + err.Error(), Next: next})
		return
	}
	setTokenCookie(w, r, tok.SecretID)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// safeNext keeps a redirect target inside the UI: a path under /ui/ and
// nothing that a browser could read as another host.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/jobs"
	}
	return next
}

func setTokenCookie(w http.ResponseWriter, r *http.Request, secret string) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: secret, Path: "/ui/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
}

// login checks the submitted token before it sets the cookie, so a typo
// is told at once instead of on the next page.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		u.renderLogin(w, r, http.StatusBadRequest, loginData{Error: "The form could not be read."})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if !sameOrigin(r) {
		u.renderLogin(w, r, http.StatusForbidden, loginData{Error: "The sign-in form was sent from another site; sign in from this page.", Next: next})
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	if secret == "" {
		u.renderLogin(w, r, http.StatusBadRequest, loginData{Error: "Enter a token's secret ID.", Next: next})
		return
	}
	if u.aclEnabled() {
		if _, _, err := u.cfg.Resolver.ResolveToken(secret); err != nil {
			u.renderLogin(w, r, http.StatusForbidden, loginData{Error: "That token is not valid.", Next: next})
			return
		}
	}
	setTokenCookie(w, r, secret)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		// Another site may not sign the browser out.
		http.Error(w, "The sign-out was sent from another site.", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/ui/settings/tokens", http.StatusSeeOther)
}

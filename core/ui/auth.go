package ui

import (
	"net/http"
	"strings"
	"time"
)

// Signing in stores the secret itself in an HttpOnly cookie. A later slice
// exchanges a one-time token (drover ui -authenticate) for a server-side
// session, so that the browser holds no long-lived secret.

// maxLoginBody bounds the login form: a secret is a UUID.
const maxLoginBody = 16 << 10

type loginData struct {
	Error   string
	Enabled bool
}

func (u *UI) aclEnabled() bool { return u.cfg.Resolver != nil && u.cfg.Resolver.ACLEnabled() }

func (u *UI) loginForm(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, &request{aclOn: u.aclEnabled()}, http.StatusOK, &view{tmpl: "login", title: "Sign in", data: loginData{Enabled: u.aclEnabled()}}, time.Now())
}

// login checks the submitted token before it sets the cookie, so a typo
// is told at once instead of on the next page.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		u.render(w, r, &request{aclOn: u.aclEnabled()}, http.StatusBadRequest, &view{tmpl: "login", title: "Sign in", data: loginData{Error: "The form could not be read.", Enabled: u.aclEnabled()}}, time.Now())
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	if secret == "" {
		u.render(w, r, &request{aclOn: u.aclEnabled()}, http.StatusBadRequest, &view{tmpl: "login", title: "Sign in", data: loginData{Error: "Enter a token's secret ID.", Enabled: u.aclEnabled()}}, time.Now())
		return
	}
	if u.aclEnabled() {
		if _, _, err := u.cfg.Resolver.ResolveToken(secret); err != nil {
			u.render(w, r, &request{aclOn: true}, http.StatusForbidden, &view{tmpl: "login", title: "Sign in", data: loginData{Error: "That token is not valid.", Enabled: true}}, time.Now())
			return
		}
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: secret, Path: "/ui/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/ui/jobs", http.StatusSeeOther)
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

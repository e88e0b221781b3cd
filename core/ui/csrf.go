package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
)

// Cross-site request forgery. A form that writes carries a per-session
// token in a hidden field, and the POST is accepted only when the field
// equals the csrfCookie the same browser holds (a double submit). The
// cookie is SameSite=Strict and HttpOnly, so another site can neither
// make the browser send it nor read it to fill the field; the token
// cookie is SameSite=Strict too, so a forged POST does not even carry the
// caller's identity. Where the browser says where a request comes from
// (Sec-Fetch-Site, Origin), a request from another site is refused before
// any of that is looked at.

const (
	csrfCookie = "drover_csrf"
	csrfField  = "csrf"
)

// csrfToken is the browser session's CSRF token, minted and set as a
// session cookie on the first form page.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 64 {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	tok := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: tok, Path: "/ui/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	return tok
}

// checkCSRF reports why a POST is refused, or "" when it may proceed.
func checkCSRF(r *http.Request) string {
	if !sameOrigin(r) {
		return "The form was sent from another site. Open the page on this site and confirm there."
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return "The form has no session (cookies may be off). Open the page again and confirm there."
	}
	if subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostForm.Get(csrfField))) != 1 {
		return "The form's session token does not match (the page may be from an older session). Open the page again and confirm there."
	}
	return ""
}

// sameOrigin reports whether a browser that says where the request comes
// from says it is this origin. Sec-Fetch-Site, which no page's script can
// set, decides where the browser sends it: a form posted from a page
// with Referrer-Policy no-referrer (the sign-in page, whose address may
// hold a one-time token) carries "Origin: null" even to its own origin.
// Without it, Origin decides, and "null" (an opaque origin, such as a
// sandboxed frame's) is another site. A request with neither (an old
// browser, curl) passes here and is left to the CSRF token.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Scheme != "" && u.Host == r.Host
}

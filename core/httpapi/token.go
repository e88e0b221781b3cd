package httpapi

import (
	"net/http"
	"strings"
)

// requestToken returns the ACL secret a request carries: the X-Nomad-Token
// header, else an "Authorization: Bearer <secret>" header, else "" (the
// anonymous caller). Surrounding whitespace is ignored.
func requestToken(r *http.Request) string {
	if t := strings.TrimSpace(r.Header.Get("X-Nomad-Token")); t != "" {
		return t
	}
	auth := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(auth) > len("Bearer ") && strings.EqualFold(auth[:len("Bearer ")], "Bearer ") {
		return strings.TrimSpace(auth[len("Bearer "):])
	}
	return ""
}

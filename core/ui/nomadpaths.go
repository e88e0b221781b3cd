package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// Nomad's web UI addresses, which Nomad's CLI prints and opens (`nomad ui
// <id>`, `nomad ui -authenticate`) and users bookmark, answered with a
// redirect to the drover page that shows the same object. Nomad names a
// namespaced object "<id>@<namespace>"; without "@" it is in the default
// namespace. The redirects carry the query (an ott among it) along.

// nomadRoutes registers Nomad's addresses on mux.
func (u *UI) nomadRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /ui/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, ns := splitNamespaced(r.PathValue("id"))
		redirect(w, r, "/ui/jobs/"+url.PathEscape(ns)+"/"+url.PathEscape(id))
	})
	mux.HandleFunc("GET /ui/clients", func(w http.ResponseWriter, r *http.Request) { redirect(w, r, "/ui/nodes") })
	mux.HandleFunc("GET /ui/clients/{id}", func(w http.ResponseWriter, r *http.Request) {
		redirect(w, r, "/ui/nodes/"+url.PathEscape(r.PathValue("id")))
	})
	mux.HandleFunc("GET /ui/clients/{id}/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		redirect(w, r, "/ui/nodes/"+url.PathEscape(r.PathValue("id")))
	})
	mux.HandleFunc("GET /ui/servers/{name}", func(w http.ResponseWriter, r *http.Request) { redirect(w, r, "/ui/servers") })
	mux.HandleFunc("GET /ui/csi/volumes", func(w http.ResponseWriter, r *http.Request) { redirect(w, r, "/ui/volumes") })
	mux.HandleFunc("GET /ui/csi/volumes/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, ns := splitNamespaced(r.PathValue("id"))
		redirect(w, r, "/ui/volumes/"+url.PathEscape(ns)+"/"+url.PathEscape(id))
	})
	mux.HandleFunc("GET /ui/csi/plugins", func(w http.ResponseWriter, r *http.Request) { redirect(w, r, "/ui/plugins") })
	mux.HandleFunc("GET /ui/csi/plugins/{id}", func(w http.ResponseWriter, r *http.Request) {
		redirect(w, r, "/ui/plugins/csi/"+url.PathEscape(r.PathValue("id")))
	})
	mux.HandleFunc("GET /ui/allocations/{id}/{task}", func(w http.ResponseWriter, r *http.Request) {
		// Nomad's task page of an allocation: drover shows tasks on the
		// allocation's page.
		redirect(w, r, "/ui/allocations/"+url.PathEscape(r.PathValue("id")))
	})
}

// splitNamespaced splits Nomad's "<id>@<namespace>" at its last "@" (job
// IDs may hold "@"; namespace names may not); without one the object is
// in the default namespace.
func splitNamespaced(v string) (id, ns string) {
	if i := strings.LastIndexByte(v, '@'); i > 0 && i < len(v)-1 {
		return v[:i], v[i+1:]
	}
	return v, structs.DefaultNamespace
}

// redirect sends the browser to path with the request's query.
func redirect(w http.ResponseWriter, r *http.Request, path string) {
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, path, http.StatusFound)
}

// rootRedirect is /ui/: the one-time token of `nomad ui -authenticate`
// (/ui?ott=…, /?ott=…) goes to the sign-in page that exchanges it, any
// other visit to the jobs list.
func rootRedirect(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has(ottParam) {
		redirect(w, r, "/ui/settings/tokens")
		return
	}
	http.Redirect(w, r, "/ui/jobs", http.StatusFound)
}

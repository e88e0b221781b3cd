// Package ui serves drover's web UI: server-rendered HTML pages over the
// same state store and ACL resolution the HTTP API uses. Reading works
// without JavaScript; the one script (logs.js, following a task's log) is
// served from /ui/ and allowed on the logs page alone.
// Writes (stop, purge, force a periodic launch, dispatch, promote or fail
// a deployment, drain a node or change its eligibility) go through a confirmation page and a POST form guarded
// against cross-site requests (csrf.go), and are authorized with the
// caller's ACL exactly as the HTTP API authorizes the same write.
package ui

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/ui.css
var baseCSS []byte

//go:embed static/logs.js
var logsJS []byte

// liveJS refreshes a page's main content in place (static/live.js).
//
//go:embed static/live.js
var liveJS []byte

// favicon is the pages' icon; linking it keeps the browser from asking
// for /favicon.ico, which is no UI page.
//
//go:embed static/favicon.svg
var favicon []byte

// Resolver turns a token's secret into its ACL; it is the HTTP API's
// resolver, so the UI and the API authorize alike.
type Resolver interface {
	ResolveToken(secretID string) (*structs.ACLToken, *acl.ACL, error)
	ACLEnabled() bool
}

// Peer is one server of the Raft configuration.
type Peer struct {
	ID      string
	Node    string
	Address string
	Leader  bool
	Voter   bool
}

// Config wires the UI to an agent's server.
type Config struct {
	// State returns the current state store; it is called per request
	// because a snapshot restore swaps the store.
	State func() *state.StateStore
	// Resolver authorizes requests; nil (or not ACLEnabled) turns ACLs off.
	Resolver Resolver
	// Token returns the secret a request carries in its headers (the
	// API's X-Nomad-Token / Bearer parsing); the UI falls back to its
	// cookie.
	Token func(r *http.Request) string
	// Peers lists the Raft configuration; nil shows the leader alone.
	Peers func() ([]Peer, error)
	// LeaderAddr is the leader's RPC address, "" without a leader.
	LeaderAddr func() string
	Region     string
	// Actions makes the writes of the UI's forms and exchanges one-time
	// tokens; nil answers every action with 501.
	Actions Actions
	// AgentPlugins lists this agent's own plugins (scheduler, driver, CSI
	// bridge, GC) with their versions; nil shows none.
	AgentPlugins func() []structs.AgentPlugin
	// Logs reads a task's log with the caller's token through the HTTP
	// API's /v1/client/fs/logs (so it is authorized and forwarded to the
	// allocation's node as the API is); nil shows no logs.
	Logs LogReader
}

// Actions are the writes the UI makes on the caller's behalf. The UI has
// already checked the caller's ACL when it calls them; errors carry a
// structs error kind (ErrNotFound, ErrPermissionDenied, ErrInvalid, …)
// that decides the page's status.
type Actions interface {
	// ExchangeOneTimeToken spends a one-time token and returns the ACL
	// token it stands for; a spent, expired or unknown one is an error of
	// kind structs.ErrPermissionDenied.
	ExchangeOneTimeToken(ctx context.Context, secret string) (*structs.ACLToken, error)
	StopJob(ctx context.Context, ns, id string, purge bool) (*structs.JobDeregisterResponse, error)
	ForcePeriodic(ctx context.Context, ns, id string) (*structs.PeriodicForceResponse, error)
	DispatchJob(ctx context.Context, ns string, req *structs.JobDispatchRequest) (*structs.JobDispatchResponse, error)
	PromoteDeployment(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error)
	FailDeployment(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error)
	// UpdateNodeDrain sets a node's drain (spec) or, with spec nil, stops
	// it, marking the node eligible again when markEligible is set.
	UpdateNodeDrain(ctx context.Context, nodeID string, spec *structs.DrainSpec, markEligible bool) (*structs.NodeEligibilityUpdateResponse, error)
	UpdateNodeEligibility(ctx context.Context, nodeID, eligibility string) (*structs.NodeEligibilityUpdateResponse, error)
}

// cookieName holds the token set by /ui/login.
const cookieName = "drover_token"

// csp forbids every script and every inline style (bar widths are
// classes): the pages need none. The logs page alone answers with
// scriptCSP, which allows the UI's own logs.js and its fetch of the
// followed log from this origin (still no inline script).
const (
	csp       = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	scriptCSP = "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

// UI is the http.Handler of /ui/.
type UI struct {
	cfg Config
	mux *http.ServeMux
}

// templates and css are parsed and built on the first UI request, not at
// the agent's start (~6 ms of CPU, most agents never serve a page), and
// shared by every UI: a parsed template is safe to execute concurrently.
// A template that does not parse panics there, a build defect that
// TestTemplatesParse catches.
var (
	templates = sync.OnceValue(parseTemplates)
	css       = sync.OnceValue(buildCSS)
)

// New builds the UI.
func New(cfg Config) *UI {
	u := &UI{cfg: cfg, mux: http.NewServeMux()}
	u.mux.HandleFunc("GET /ui/{$}", rootRedirect)
	u.mux.HandleFunc("GET /ui/live.js", u.serveLiveJS)
	u.nomadRoutes(u.mux)
	u.mux.HandleFunc("GET /ui/ui.css", u.serveCSS)
	u.mux.HandleFunc("GET /ui/logs.js", u.serveJS)
	u.mux.HandleFunc("GET /ui/favicon.svg", serveFavicon)
	u.mux.HandleFunc("GET /ui/login", u.loginForm)
	u.mux.HandleFunc("GET /ui/settings/tokens", u.tokensPage)
	u.mux.HandleFunc("POST /ui/login", u.login)
	u.mux.HandleFunc("POST /ui/logout", u.logout)
	u.mux.HandleFunc("GET /ui/logout", u.logout)
	u.mux.HandleFunc("GET /ui/jobs", u.page(u.jobsPage))
	u.mux.HandleFunc("GET /ui/jobs/{ns}/{id...}", u.page(u.jobPage))
	u.mux.HandleFunc("GET /ui/allocations/{id}", u.page(u.allocPage))
	u.mux.HandleFunc("GET /ui/nodes", u.page(u.nodesPage))
	u.mux.HandleFunc("GET /ui/nodes/{id}", u.page(u.nodePage))
	u.mux.HandleFunc("GET /ui/servers", u.page(u.serversPage))
	u.mux.HandleFunc("GET /ui/evaluations", u.page(u.evalsPage))
	u.mux.HandleFunc("GET /ui/evaluations/{id}", u.page(u.evalPage))
	u.mux.HandleFunc("GET /ui/deployments", u.page(u.deploymentsPage))
	u.mux.HandleFunc("GET /ui/deployments/{id}", u.page(u.deploymentPage))
	u.mux.HandleFunc("GET /ui/volumes", u.page(u.volumesPage))
	u.mux.HandleFunc("GET /ui/volumes/{ns}/{id}", u.page(u.volumePage))
	u.mux.HandleFunc("GET /ui/plugins", u.page(u.pluginsPage))
	u.mux.HandleFunc("GET /ui/plugins/csi/{id}", u.page(u.csiPluginPage))
	u.mux.HandleFunc("GET /ui/topology", u.page(u.topologyPage))
	u.mux.HandleFunc("GET /ui/allocations/{id}/logs", u.page(u.logsPage))
	u.mux.HandleFunc("GET /ui/allocations/{id}/logs/stream", u.logStream)
	u.mux.HandleFunc("GET /ui/actions/{action}", u.page(u.confirmAction))
	u.mux.HandleFunc("POST /ui/actions/{action}", u.page(u.doAction))
	return u
}

func parseTemplates() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	out := map[string]*template.Template{}
	for _, name := range []string{"jobs", "job", "alloc", "nodes", "node", "servers", "login", "error",
		"evals", "eval", "deployments", "deployment", "volumes", "volume", "plugins", "csiplugin", "topology",
		"logs", "confirm", "done"} {
		t := template.Must(base.Clone())
		out[name] = template.Must(t.ParseFS(templateFS, "templates/"+name+".html"))
	}
	return out
}

// buildCSS appends the width classes the bars use (w0 … w100): widths as
// classes keep style-src free of 'unsafe-inline'.
func buildCSS() []byte {
	var b bytes.Buffer
	b.Write(baseCSS)
	for i := 0; i <= 100; i++ {
		fmt.Fprintf(&b, ".w%d{width:%d%%}\n", i, i)
	}
	return b.Bytes()
}

func (u *UI) serveJS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(logsJS)
}

func (u *UI) serveLiveJS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(liveJS)
}

func serveFavicon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "max-age=86400")
	_, _ = w.Write(favicon)
}

func (u *UI) serveCSS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(css())
}

// ServeHTTP sets the headers every answer carries and routes.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	u.mux.ServeHTTP(w, r)
}

// request is what a page handler gets: the caller's ACL (nil with ACLs
// off: every check passes) and the state store.
type request struct {
	*http.Request
	acl   *acl.ACL
	aclOn bool
	st    *state.StateStore
	// w lets a handler set cookies (the CSRF cookie of a form page).
	w http.ResponseWriter
	// secret is the caller's token, for the log reader.
	secret string
}

// allowNS reports whether the caller has capability in ns.
func (q *request) allowNS(ns, capability string) bool {
	return !q.aclOn || q.acl.AllowNamespaceOperation(ns, capability)
}

func (q *request) allowNodeRead() bool     { return !q.aclOn || q.acl.AllowNodeRead() }
func (q *request) allowNodeWrite() bool    { return !q.aclOn || q.acl.AllowNodeWrite() }
func (q *request) allowOperatorRead() bool { return !q.aclOn || q.acl.AllowOperatorRead() }
func (q *request) allowAgentRead() bool    { return !q.aclOn || q.acl.AllowAgentRead() }
func (q *request) allowPluginRead() bool   { return !q.aclOn || q.acl.AllowPluginRead() }
func (q *request) allowPluginList() bool   { return !q.aclOn || q.acl.AllowPluginList() }

// view is a rendered page: its template and data, or an error page.
type view struct {
	tmpl  string
	title string
	data  any
	// status is the answer's status; zero is 200.
	status int
	// script allows the UI's own script on this page (scriptCSP).
	script bool
}

// pageError is a page that could not be shown, with its status and the
// sentence that says why.
type pageError struct {
	status int
	msg    string
}

func (e *pageError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &pageError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &pageError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) error {
	return &pageError{status: http.StatusForbidden, msg: fmt.Sprintf(format, args...)}
}

// resolve reads the caller's token and ACL; on a token that does not
// resolve it answers the error page and reports false.
func (u *UI) resolve(w http.ResponseWriter, r *http.Request) (*request, bool) {
	q := &request{Request: r, st: u.cfg.State(), w: w, secret: u.token(r)}
	if u.cfg.Resolver != nil && u.cfg.Resolver.ACLEnabled() {
		q.aclOn = true
		_, a, err := u.cfg.Resolver.ResolveToken(q.secret)
		if err != nil {
			u.renderError(w, r, q, resolveError(err))
			return nil, false
		}
		q.acl = a
	}
	return q, true
}

// page resolves the caller's token, runs fn and renders its view.
func (u *UI) page(fn func(q *request) (*view, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		q, ok := u.resolve(w, r)
		if !ok {
			return
		}
		v, err := fn(q)
		if err != nil {
			u.renderError(w, r, q, err)
			return
		}
		u.render(w, r, q, cmp.Or(v.status, http.StatusOK), v, start)
	}
}

// resolveError words a token that did not resolve; the secret itself is
// never echoed.
func resolveError(err error) error {
	if structs.HTTPStatus(err) >= 500 {
		return &pageError{status: structs.HTTPStatus(err), msg: "The token could not be checked: " + err.Error()}
	}
	return forbidden("Your token is not valid (it may have expired or been deleted). Sign in with another token.")
}

// token is the request's secret: the API's headers, else the cookie.
func (u *UI) token(r *http.Request) string {
	if u.cfg.Token != nil {
		if t := u.cfg.Token(r); t != "" {
			return t
		}
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return strings.TrimSpace(c.Value)
	}
	return ""
}

// layoutData is what layout.html reads around a page's content.
type layoutData struct {
	Title    string
	Nav      string
	ACL      bool
	SignedIn bool
	Region   string
	Page     any
	Rendered string
	// Live includes live.js, which refreshes the page's content in
	// place (not on pages with a form or their own script).
	Live bool
}

func (u *UI) render(w http.ResponseWriter, r *http.Request, q *request, status int, v *view, start time.Time) {
	var buf bytes.Buffer
	ld := layoutData{Title: v.title, Nav: navOf(r.URL.Path), ACL: q != nil && q.aclOn, SignedIn: u.token(r) != "", Region: u.cfg.Region, Page: v.data,
		Live: livePage(v.tmpl)}
	if err := templates()[v.tmpl].ExecuteTemplate(&buf, "layout.html", ld); err != nil {
		http.Error(w, "rendering the page failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if v.script || ld.Live {
		w.Header().Set("Content-Security-Policy", scriptCSP)
	}
	w.Header().Set("Server-Timing", fmt.Sprintf("render;dur=%.1f", float64(time.Since(start).Microseconds())/1000))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// livePage reports whether a page refreshes itself (live.js): every page
// but those with a form to fill in or a script of their own.
func livePage(tmpl string) bool {
	switch tmpl {
	case "login", "confirm", "done", "logs", "error":
		return false
	}
	return true
}

// errStatus is the status an error answers with: a pageError's own, else
// the one its structs error kind maps to.
func errStatus(err error) int {
	var pe *pageError
	if errors.As(err, &pe) {
		return pe.status
	}
	return structs.HTTPStatus(err)
}

func (u *UI) renderError(w http.ResponseWriter, r *http.Request, q *request, err error) {
	pe := &pageError{status: http.StatusInternalServerError, msg: err.Error()}
	if !errors.As(err, &pe) && structs.HTTPStatus(err) != http.StatusInternalServerError {
		pe.status = structs.HTTPStatus(err)
	}
	title := http.StatusText(pe.status)
	u.render(w, r, q, pe.status, &view{tmpl: "error", title: title, data: struct {
		Status  int
		Title   string
		Message string
		Login   bool
	}{pe.status, title, pe.msg, pe.status == http.StatusForbidden && q != nil && q.aclOn}}, time.Now())
}

// navOf names the section a path belongs to, to mark it current.
func navOf(path string) string {
	for _, s := range []string{"jobs", "allocations", "evaluations", "deployments", "nodes", "topology", "volumes", "plugins", "servers", "login", "settings"} {
		if strings.HasPrefix(path, "/ui/"+s) {
			switch s {
			case "allocations":
				return "jobs"
			case "settings":
				return "login"
			}
			return s
		}
	}
	return ""
}

package httpapi

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// TokenResolver turns a request's token into its ACL. A Server that
// implements it (or Config.Resolver) and reports ACLEnabled has every
// request authorized by the route table below; without one ACLs are off.
type TokenResolver interface {
	ResolveToken(secretID string) (*structs.ACLToken, *acl.ACL, error)
	ACLEnabled() bool
}

// errPermissionDenied is the answer to a caller whose token lacks the
// capability, with Nomad's message.
var errPermissionDenied = structs.NewError(structs.ErrPermissionDenied, "Permission denied")

// rule is what one route requires of its caller.
type rule struct {
	// public routes resolve no token (status, regions).
	public bool
	// self routes authorize their caller in their handler from the
	// secret (ACL bootstrap, one-time tokens, token self).
	self bool
	// allow decides for the caller's ACL. Routes whose namespace is only
	// known from the object they touch (an allocation by ID, a job in a
	// request body) allow any valid token here and check the object's
	// namespace in the handler (allowNS).
	allow func(a *acl.ACL, r *http.Request) bool
}

var (
	public    = rule{public: true}
	self      = rule{self: true}
	anyToken  = rule{allow: func(*acl.ACL, *http.Request) bool { return true }}
	mgmt      = rule{allow: func(a *acl.ACL, _ *http.Request) bool { return a.IsManagement() }}
	nodeRead  = rule{allow: func(a *acl.ACL, _ *http.Request) bool { return a.AllowNodeRead() }}
	nodeWrite = rule{allow: func(a *acl.ACL, _ *http.Request) bool { return a.AllowNodeWrite() }}
	agentRead = rule{allow: func(a *acl.ACL, _ *http.Request) bool { return a.AllowAgentRead() }}
	agentW    = rule{allow: func(a *acl.ACL, _ *http.Request) bool { return a.AllowAgentWrite() }}
	opRead    = rule{allow: func(a *acl.ACL, _ *http.Request) bool { return a.AllowOperatorRead() }}
	opWrite   = rule{allow: func(a *acl.ACL, _ *http.Request) bool { return a.AllowOperatorWrite() }}
)

// nsCap requires capability in the request's namespace (?namespace=,
// "default" without it). A list asked for every namespace ("*") passes
// and is filtered to the namespaces the caller has the capability in.
func nsCap(capability string) rule {
	return rule{allow: func(a *acl.ACL, r *http.Request) bool {
		ns := r.URL.Query().Get("namespace")
		switch ns {
		case "":
			ns = structs.DefaultNamespace
		case "*":
			return true
		}
		return a.AllowNamespaceOperation(ns, capability)
	}}
}

// jobRule decides /v1/job/<id>[/<action>] by its action (see jobActions).
// A register (PUT/POST without an action) is checked in register, against
// the namespace of the job in the body.
var jobRule = rule{allow: func(a *acl.ACL, r *http.Request) bool {
	action, _ := splitJobPath(r)
	capability := acl.NamespaceCapabilityReadJob
	switch {
	case action == nil && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		return true
	case action == nil && r.Method == http.MethodDelete:
		capability = acl.NamespaceCapabilitySubmitJob
	case action != nil && len(action.anyOf) == 0:
		return true // plan: checked against the body's job
	case action != nil:
		ns := namespaceOf("", r)
		return slices.ContainsFunc(action.anyOf, func(c string) bool { return a.AllowNamespaceOperation(ns, c) })
	}
	return a.AllowNamespaceOperation(namespaceOf("", r), capability)
}}

// routeRules is the authorization of every route, by its ServeMux
// pattern. routes() refuses to register a pattern missing here, so a new
// endpoint cannot go unchecked.
var routeRules = map[string]rule{
	"GET /v1/jobs":        nsCap(acl.NamespaceCapabilityListJobs),
	"PUT /v1/jobs":        anyToken, // register checks the body's namespace
	"POST /v1/jobs":       anyToken,
	"PUT /v1/jobs/parse":  nsCap(acl.NamespaceCapabilityParseJob),
	"POST /v1/jobs/parse": nsCap(acl.NamespaceCapabilityParseJob),
	"/v1/job/":            jobRule,

	"GET /v1/allocations":           nsCap(acl.NamespaceCapabilityReadJob),
	"GET /v1/allocation/{id}":       anyToken, // the alloc's namespace, in the handler
	"POST /v1/allocation/{id}/stop": anyToken,
	"PUT /v1/allocation/{id}/stop":  anyToken,

	"GET /v1/evaluations":                 nsCap(acl.NamespaceCapabilityReadJob),
	"GET /v1/evaluation/{id}":             anyToken,
	"GET /v1/evaluation/{id}/allocations": anyToken,

	"GET /v1/nodes":                  nodeRead,
	"GET /v1/node/{id}":              nodeRead,
	"POST /v1/node/{id}/eligibility": nodeWrite,
	"PUT /v1/node/{id}/eligibility":  nodeWrite,
	"POST /v1/node/{id}/drain":       nodeWrite,
	"PUT /v1/node/{id}/drain":        nodeWrite,
	"GET /v1/client/fs/logs/{alloc}": anyToken, // read-logs in the alloc's namespace

	"GET /v1/agent/self":            agentRead,
	"PUT /v1/agent/plugins/reload":  agentW,
	"POST /v1/agent/plugins/reload": agentW,
	"GET /v1/agent/plugins":         agentRead,
	"GET /v1/agent/plugin":          agentRead,
	"GET /v1/agent/plugins/{name}":  agentRead,
	"GET /v1/agent/members":         agentRead,

	"GET /v1/status/leader": public,
	"GET /v1/status/peers":  public,
	"GET /v1/regions":       public,

	"GET /v1/operator/raft/configuration":       opRead,
	"DELETE /v1/operator/raft/peer":             opWrite,
	"GET /v1/operator/scheduler/configuration":  opRead,
	"PUT /v1/operator/scheduler/configuration":  opWrite,
	"POST /v1/operator/scheduler/configuration": opWrite,
	// A join token is a credential: reading one is a write's privilege.
	"GET /v1/operator/join-token/{role}":         opWrite,
	"PUT /v1/operator/join-token/{role}/rotate":  opWrite,
	"POST /v1/operator/join-token/{role}/rotate": opWrite,

	// Force GC deletes cluster state: management only, as in Nomad.
	"PUT /v1/system/gc":                  mgmt,
	"PUT /v1/system/reconcile/summaries": mgmt,

	// Checked per topic and per event in the handler.
	"GET /v1/event/stream": anyToken,
	// Scrapers send no token; nothing in it names an object (no IDs).
	"GET /v1/metrics": public,

	"GET /v1/namespaces":          anyToken, // filtered to the caller's namespaces
	"GET /v1/namespace/{name}":    rule{allow: func(a *acl.ACL, r *http.Request) bool { return a.AllowNamespace(r.PathValue("name")) }},
	"PUT /v1/namespace/{name}":    mgmt,
	"POST /v1/namespace/{name}":   mgmt,
	"PUT /v1/namespace":           mgmt,
	"POST /v1/namespace":          mgmt,
	"DELETE /v1/namespace/{name}": mgmt,
}

func init() {
	for _, p := range append(slices.Clone(ACLRoutes), ACLCRUDRoutes...) {
		routeRules[p] = self
	}
	maps.Copy(routeRules, deploymentRoutes)
	maps.Copy(routeRules, serviceRoutes)
	maps.Copy(routeRules, scalingRoutes)
}

// aclKey carries a request's resolved ACL in its context.
type aclKey struct{}

// requestACL is the ACL the request was authorized with, or nil when
// ACLs are off (every check passes).
func requestACL(r *http.Request) *acl.ACL {
	a, _ := r.Context().Value(aclKey{}).(*acl.ACL)
	return a
}

// allowNS reports whether the caller has capability in namespace ns.
func allowNS(r *http.Request, ns, capability string) bool {
	a := requestACL(r)
	return a == nil || a.AllowNamespaceOperation(ns, capability)
}

// nsFilter is allowNS for one capability, for filtering lists.
func nsFilter(r *http.Request, capability string) func(ns string) bool {
	a := requestACL(r)
	if a == nil || a.IsManagement() {
		return func(string) bool { return true }
	}
	return func(ns string) bool { return a.AllowNamespaceOperation(ns, capability) }
}

// filterNS keeps the items whose namespace passes allow.
func filterNS[T any](items []T, nsOf func(T) string, allow func(string) bool) []T {
	out := items[:0:0]
	for _, it := range items {
		if allow(nsOf(it)) {
			out = append(out, it)
		}
	}
	return out
}

// routeMux registers handlers behind their route's rule.
type routeMux struct {
	s        *HTTPServer
	mux      *http.ServeMux
	patterns []string
}

// HandleFunc registers h for pattern behind routeRules[pattern]; a pattern
// without a rule is a programming error, caught when the server is built.
func (m *routeMux) HandleFunc(pattern string, h http.HandlerFunc) {
	r, ok := routeRules[pattern]
	if !ok {
		panic(fmt.Sprintf("httpapi: route %q has no entry in routeRules", pattern))
	}
	m.patterns = append(m.patterns, pattern)
	inner := m.s.authorize(r, h)
	m.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		setRoute(req, pattern)
		inner.ServeHTTP(w, req)
	}))
}

// authorize resolves the caller's token and applies rule before next.
func (s *HTTPServer) authorize(rl rule, next http.HandlerFunc) http.Handler {
	if rl.public || rl.self {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := s.resolver
		if res == nil || !res.ACLEnabled() {
			next(w, r)
			return
		}
		_, a, err := res.ResolveToken(requestToken(r))
		if err != nil {
			s.writeError(w, err)
			return
		}
		if !rl.allow(a, r) {
			s.writeError(w, errPermissionDenied)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), aclKey{}, a)))
	})
}

// splitJobPath splits /v1/job/<id>[/<action>] as jobRoute does. Of the
// actions with the matching suffix it takes the one serving the request's
// method, else the first (which then answers 405).
func splitJobPath(r *http.Request) (*jobAction, string) {
	rest := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/job/")
	for i := range jobActions {
		trimmed, ok := strings.CutSuffix(rest, jobActions[i].suffix)
		if !ok {
			continue
		}
		for j := i; j < len(jobActions); j++ {
			if jobActions[j].suffix == jobActions[i].suffix && slices.Contains(jobActions[j].methods, r.Method) {
				return &jobActions[j].jobAction, trimmed
			}
		}
		return &jobActions[i].jobAction, trimmed
	}
	return nil, rest
}

// actionMethods lists the methods served on the action's suffix.
func actionMethods(action *jobAction) []string {
	var out []string
	for i := range jobActions {
		if &jobActions[i].jobAction == action {
			for j := range jobActions {
				if jobActions[j].suffix == jobActions[i].suffix {
					out = append(out, jobActions[j].methods...)
				}
			}
		}
	}
	return out
}

// redactedValue replaces each task Env value a caller may not read.
const redactedValue = "(redacted)"

// jobView is how the request's caller sees jobs: as submitted (userJob),
// with every task's Env values redacted unless the caller may submit jobs
// in the job's namespace (Env carries secrets). Stored jobs are never
// changed: a redacted job is a copy, made once per job per request.
func jobView(r *http.Request) func(*structs.Job) *structs.Job {
	a := requestACL(r)
	if a == nil || a.IsManagement() {
		return userJob
	}
	seen := map[*structs.Job]*structs.Job{}
	return func(j *structs.Job) *structs.Job {
		if j == nil || a.AllowNamespaceOperation(j.Namespace, acl.NamespaceCapabilitySubmitJob) {
			return userJob(j)
		}
		if c, ok := seen[j]; ok {
			return c
		}
		c := userJob(j)
		if c == j {
			c = j.Copy()
		}
		for _, tg := range c.TaskGroups {
			for _, t := range tg.Tasks {
				if len(t.Env) == 0 {
					continue
				}
				env := make(map[string]string, len(t.Env))
				for k := range t.Env {
					env[k] = redactedValue
				}
				t.Env = env
			}
		}
		seen[j] = c
		return c
	}
}

// allocView is jobView for the job embedded in allocations.
func allocView(r *http.Request) func(*structs.Allocation) *structs.Allocation {
	view := jobView(r)
	return func(a *structs.Allocation) *structs.Allocation {
		if j := view(a.Job); j != a.Job {
			c := *a
			c.Job = j
			return &c
		}
		return a
	}
}

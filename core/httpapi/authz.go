package httpapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/structs"
)

// TokenResolver turns a request's token into its ACL. A Server that
// implements it (or Config.Resolver) and reports ACLEnabled has every
// request authorized by its route's rule (routeTable); without one ACLs
// are off.
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
	// need names what the caller needs ("node:read", "namespace:read-job"),
	// for readers of the route table and for its test.
	need string
	// allow decides for the caller's ACL. Routes whose namespace is only
	// known from the object they touch (an allocation by ID, a job in a
	// request body) allow any valid token here and check the object's
	// namespace in the handler (allowNS).
	allow func(a *acl.ACL, r *http.Request) bool
}

// check reports a rule that decides nothing (the zero rule: a route
// entry that forgot its rule) or more than one way.
func (rl rule) check() error {
	ways := 0
	for _, set := range []bool{rl.public, rl.self, rl.allow != nil} {
		if set {
			ways++
		}
	}
	switch {
	case ways == 0:
		return errRouteNoRule
	case ways > 1:
		return errors.New("route rule is more than one of public, self and allow")
	case rl.need == "":
		return errors.New("route rule does not name what it needs")
	}
	return nil
}

// aclRule is the rule of a capability that does not depend on the request.
func aclRule(need string, allow func(a *acl.ACL) bool) rule {
	return rule{need: need, allow: func(a *acl.ACL, _ *http.Request) bool { return allow(a) }}
}

var (
	public     = rule{public: true, need: "public"}
	self       = rule{self: true, need: "self"}
	anyToken   = aclRule("token", func(*acl.ACL) bool { return true })
	mgmt       = aclRule("management", (*acl.ACL).IsManagement)
	nodeRead   = aclRule("node:read", (*acl.ACL).AllowNodeRead)
	nodeWrite  = aclRule("node:write", (*acl.ACL).AllowNodeWrite)
	agentRead  = aclRule("agent:read", (*acl.ACL).AllowAgentRead)
	agentWrite = aclRule("agent:write", (*acl.ACL).AllowAgentWrite)
	opRead     = aclRule("operator:read", (*acl.ACL).AllowOperatorRead)
	opWrite    = aclRule("operator:write", (*acl.ACL).AllowOperatorWrite)
	pluginList = aclRule("plugin:list", (*acl.ACL).AllowPluginList)
	pluginRead = aclRule("plugin:read", (*acl.ACL).AllowPluginRead)

	// namespaceVisible requires any capability in the namespace named by
	// the path's {name}.
	namespaceVisible = rule{need: "namespace:any", allow: func(a *acl.ACL, r *http.Request) bool {
		return a.AllowNamespace(r.PathValue("name"))
	}}
)

// nsCap requires capability in the request's namespace (?namespace=,
// "default" without it). A list asked for every namespace ("*") passes
// and is filtered to the namespaces the caller has the capability in.
func nsCap(capability string) rule {
	return rule{need: "namespace:" + capability, allow: func(a *acl.ACL, r *http.Request) bool {
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
var jobRule = rule{need: "job", allow: func(a *acl.ACL, r *http.Request) bool {
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

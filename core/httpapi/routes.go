package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/drover-org/drover/core/acl"
)

// handler serves one route. It is made by on from a method expression of
// the route's handler group (on(jobHandlers.jobList)), so that the route
// table is a plain value that names each route's handler.
type handler func(s *HTTPServer, w http.ResponseWriter, r *http.Request)

// on makes the handler of a route from a method expression of a handler
// group: a struct type that embeds *HTTPServer alone, one per area of the
// API (jobHandlers, csiHandlers, ...), so that the server's own type keeps
// only its plumbing.
func on[G ~struct{ *HTTPServer }](serve func(G, http.ResponseWriter, *http.Request)) handler {
	return func(s *HTTPServer, w http.ResponseWriter, r *http.Request) { serve(G{s}, w, r) }
}

// route is one entry of the route table: everything the API knows about
// an endpoint. Entries are written as unkeyed literals, so the compiler
// refuses one that leaves out its rule or its handler; checkRoutes refuses
// a zero rule or a nil handler when the server is built.
type route struct {
	// methods are the HTTP methods served, separated by spaces; each is
	// registered as its own ServeMux pattern ("PUT /v1/jobs"), which is
	// also the route's name in request metrics. Empty serves every method
	// (the handler answers 405 itself).
	methods string
	// path is the ServeMux path pattern.
	path string
	// rule authorizes the caller before handle runs (authorize).
	rule   rule
	handle handler
}

// patterns are the ServeMux patterns of the entry, one per method.
func (rt route) patterns() []string {
	if rt.methods == "" {
		return []string{rt.path}
	}
	var out []string
	for _, m := range strings.Fields(rt.methods) {
		out = append(out, m+" "+rt.path)
	}
	return out
}

// routeTable is every route of the API. routes() registers exactly these
// and nothing else, each behind its own rule.
var routeTable = []route{
	// Jobs. Job IDs may contain slashes (periodic and dispatched
	// children), so /v1/job/ is routed by suffix (jobActions, which also
	// name each action's capabilities) rather than by pattern.
	{"GET", "/v1/jobs", nsCap(acl.NamespaceCapabilityListJobs), on(jobHandlers.jobList)},
	{"PUT POST", "/v1/jobs", anyToken, on(jobHandlers.jobRegister)}, // register checks the body's namespace
	{"PUT POST", "/v1/jobs/parse", nsCap(acl.NamespaceCapabilityParseJob), on(jobHandlers.jobParse)},
	{"", "/v1/job/", jobRule, on(jobHandlers.jobRoute)},
	// read-job in the body's job's namespace, checked in the handler.
	{"PUT POST", "/v1/validate/job", anyToken, on(jobHandlers.validateJob)},

	// Deployments: reads need read-job and writes submit-job in the
	// deployment's namespace, checked in the handler once it is read.
	{"GET", "/v1/deployments", nsCap(acl.NamespaceCapabilityReadJob), on(deploymentHandlers.deploymentList)},
	{"GET", "/v1/deployment/{id}", anyToken, on(deploymentHandlers.deploymentGet)},
	{"GET", "/v1/deployment/allocations/{id}", anyToken, on(deploymentHandlers.deploymentAllocs)},
	{"POST PUT", "/v1/deployment/promote/{id}", anyToken, on(deploymentHandlers.deploymentPromote)},
	{"POST PUT", "/v1/deployment/fail/{id}", anyToken, on(deploymentHandlers.deploymentFail)},
	{"POST PUT", "/v1/deployment/pause/{id}", anyToken, on(deploymentHandlers.deploymentPause)},
	{"POST PUT", "/v1/deployment/allocation-health/{id}", anyToken, on(deploymentHandlers.deploymentAllocHealth)},

	// Services, as Nomad's: read-job in the namespace to read, submit-job
	// to delete (a list of every namespace is filtered to those the
	// caller may read).
	{"GET", "/v1/services", nsCap(acl.NamespaceCapabilityReadJob), on(serviceHandlers.serviceList)},
	{"GET", "/v1/service/{name}", nsCap(acl.NamespaceCapabilityReadJob), on(serviceHandlers.serviceGet)},
	{"DELETE", "/v1/service/{name}/{id}", nsCap(acl.NamespaceCapabilitySubmitJob), on(serviceHandlers.serviceDelete)},

	// Scaling policies.
	{"GET", "/v1/scaling/policies", nsCap(acl.NamespaceCapabilityListScalingPolicies), on(scalingHandlers.scalingPolicyList)},
	{"GET", "/v1/scaling/policy/{id}", nsCap(acl.NamespaceCapabilityReadScalingPolicy), on(scalingHandlers.scalingPolicyGet)},

	// Allocations and evaluations by ID: their namespace is known once
	// they are read, and checked in the handler.
	{"GET", "/v1/allocations", nsCap(acl.NamespaceCapabilityReadJob), on(objectHandlers.allocList)},
	{"GET", "/v1/allocation/{id}", anyToken, on(objectHandlers.allocGet)},
	{"POST PUT", "/v1/allocation/{id}/stop", anyToken, on(objectHandlers.allocStop)},
	{"GET", "/v1/evaluations", nsCap(acl.NamespaceCapabilityReadJob), on(objectHandlers.evalList)},
	{"GET", "/v1/evaluation/{id}", anyToken, on(objectHandlers.evalGet)},
	// Deleting evals is management only, as in Nomad.
	{"DELETE", "/v1/evaluations", mgmt, on(adminHandlers.evalDelete)},
	{"GET", "/v1/evaluation/{id}/allocations", anyToken, on(objectHandlers.evalAllocs)},

	// Nodes, and node pools as Nomad authorizes them without node_pool
	// policies: reads need node read, writes node write; the jobs of a
	// pool are further filtered to the namespaces the caller may list
	// jobs in. GET /v1/node/pool/{name} would overlap GET
	// /v1/node/{id}/allocations (both match /v1/node/pool/allocations and
	// neither is more specific), so one pattern serves both (nodeSub).
	{"GET", "/v1/nodes", nodeRead, on(objectHandlers.nodeList)},
	{"GET", "/v1/node/{id}", nodeRead, on(objectHandlers.nodeGet)},
	{"POST PUT", "/v1/node/{id}/eligibility", nodeWrite, on(objectHandlers.nodeEligibility)},
	{"POST PUT", "/v1/node/{id}/drain", nodeWrite, on(objectHandlers.nodeDrain)},
	{"POST PUT", "/v1/node/{id}/evaluate", nodeWrite, on(adminHandlers.nodeEvaluate)},
	{"POST PUT", "/v1/node/{id}/purge", nodeWrite, on(adminHandlers.nodePurge)},
	{"GET", "/v1/node/pools", nodeRead, on(nodePoolHandlers.nodePoolList)},
	{"PUT POST", "/v1/node/pools", nodeWrite, on(nodePoolHandlers.nodePoolUpsert)},
	{"GET", "/v1/node/{id}/{sub}", nodeRead, on(nodePoolHandlers.nodeSub)}, // a pool, or a node's allocations
	{"DELETE", "/v1/node/pool/{name}", nodeWrite, on(nodePoolHandlers.nodePoolDelete)},
	{"GET", "/v1/node/pool/{name}/nodes", nodeRead, on(nodePoolHandlers.nodePoolNodes)},
	{"GET", "/v1/node/pool/{name}/jobs", nodeRead, on(nodePoolHandlers.nodePoolJobs)},

	// read-logs in the allocation's namespace, checked in the handler.
	{"GET", "/v1/client/fs/logs/{alloc}", anyToken, on(logHandlers.allocLogs)},
	// The client-side API, served by the node's client or forwarded to
	// it: read-fs, read-job or alloc-lifecycle in the allocation's
	// namespace, checked in the handler; node read or write for the
	// node's own stats and metadata.
	{"GET", "/v1/client/fs/ls/{alloc}", anyToken, on(clientHandlers.fsList)},
	{"GET", "/v1/client/fs/stat/{alloc}", anyToken, on(clientHandlers.fsStat)},
	{"GET", "/v1/client/fs/cat/{alloc}", anyToken, on(clientHandlers.fsCat)},
	{"GET", "/v1/client/fs/readat/{alloc}", anyToken, on(clientHandlers.fsReadAt)},
	{"GET", "/v1/client/fs/stream/{alloc}", anyToken, on(clientHandlers.fsStream)},
	{"GET", "/v1/client/allocation/{alloc}/stats", anyToken, on(clientHandlers.allocStats)},
	{"GET", "/v1/client/allocation/{alloc}/checks", anyToken, on(clientHandlers.allocChecks)},
	{"PUT POST", "/v1/client/allocation/{alloc}/restart", anyToken, on(clientHandlers.allocRestart)},
	{"PUT POST", "/v1/client/allocation/{alloc}/signal", anyToken, on(clientHandlers.allocSignal)},
	// alloc exec: a websocket (exec.go); alloc-exec, and alloc-node-exec
	// for a driver without file system isolation, checked in the handler.
	{"GET", "/v1/client/allocation/{alloc}/exec", anyToken, on(clientHandlers.allocExec)},
	{"GET", "/v1/client/stats", nodeRead, on(clientHandlers.clientStats)},
	{"GET", "/v1/client/metadata", nodeRead, on(clientHandlers.metaRead)},
	{"PUT POST", "/v1/client/metadata", nodeWrite, on(clientHandlers.metaApply)},

	// This agent: never forwarded to the leader.
	{"GET", "/v1/agent/self", agentRead, on(agentHandlers.agentSelf)},
	{"PUT POST", "/v1/agent/plugins/reload", agentWrite, on(agentHandlers.agentReloadPlugins)},
	{"GET", "/v1/agent/plugins", agentRead, on(agentHandlers.agentPlugins)},
	{"GET", "/v1/agent/plugin", agentRead, on(agentHandlers.agentPluginByQuery)},
	{"GET", "/v1/agent/plugins/{name}", agentRead, on(agentHandlers.agentPluginByName)},
	{"GET", "/v1/agent/members", agentRead, on(agentHandlers.agentMembers)},
	{"GET", "/v1/agent/health", public, on(agentHandlers.agentHealth)},

	// This agent's operations, as Nomad's (agent_ops.go, monitor.go): the
	// log stream and scheduler workers need agent:read, joins, force-leave
	// and worker config writes agent:write; profiles agent:write, and
	// with ACLs off enable_debug (checked in the handler).
	{"GET", "/v1/agent/monitor", agentRead, on(agentHandlers.agentMonitor)},
	{"PUT POST", "/v1/agent/join", agentWrite, on(agentHandlers.agentJoin)},
	{"PUT POST", "/v1/agent/force-leave", agentWrite, on(agentHandlers.agentForceLeave)},
	{"GET", "/v1/agent/schedulers", agentRead, on(agentHandlers.agentSchedulers)},
	{"GET", "/v1/agent/schedulers/config", agentRead, on(agentHandlers.agentSchedulerConfigGet)},
	{"PUT POST", "/v1/agent/schedulers/config", agentWrite, on(agentHandlers.agentSchedulerConfigSet)},
	{"GET", "/v1/agent/pprof/{profile}", agentWrite, on(agentHandlers.agentPprof)},

	// The ACL bootstrap and one-time tokens, policies and tokens: each
	// server method authorizes its caller from the secret it is given.
	// /v1/acl/token/self and the one-time token routes are literal
	// segments, so ServeMux prefers them to {accessor}.
	{"PUT POST", "/v1/acl/bootstrap", self, on(aclHandlers.aclBootstrap)},
	{"PUT POST", "/v1/acl/token/onetime", self, on(aclHandlers.oneTimeTokenUpsert)},
	{"PUT POST", "/v1/acl/token/onetime/exchange", self, on(aclHandlers.oneTimeTokenExchange)},
	{"GET", "/v1/acl/policies", self, on(aclHandlers.aclPolicyList)},
	{"GET", "/v1/acl/policy/{name}", self, on(aclHandlers.aclPolicyGet)},
	{"PUT POST", "/v1/acl/policy/{name}", self, on(aclHandlers.aclPolicyUpsert)},
	{"DELETE", "/v1/acl/policy/{name}", self, on(aclHandlers.aclPolicyDelete)},
	{"GET", "/v1/acl/tokens", self, on(aclHandlers.aclTokenList)},
	{"PUT POST", "/v1/acl/token", self, on(aclHandlers.aclTokenCreate)},
	{"GET", "/v1/acl/token/self", self, on(aclHandlers.aclTokenSelf)},
	{"GET", "/v1/acl/token/{accessor}", self, on(aclHandlers.aclTokenGet)},
	{"PUT POST", "/v1/acl/token/{accessor}", self, on(aclHandlers.aclTokenUpdate)},
	{"DELETE", "/v1/acl/token/{accessor}", self, on(aclHandlers.aclTokenDelete)},
	// ACL roles (acl_roles.go).
	{"GET", "/v1/acl/roles", self, on(aclHandlers.aclRoleList)},
	{"PUT POST", "/v1/acl/role", self, on(aclHandlers.aclRoleCreate)},
	{"GET", "/v1/acl/role/name/{name}", self, on(aclHandlers.aclRoleGetByName)},
	{"GET", "/v1/acl/role/{id}", self, on(aclHandlers.aclRoleGet)},
	{"PUT POST", "/v1/acl/role/{id}", self, on(aclHandlers.aclRoleUpdate)},
	{"DELETE", "/v1/acl/role/{id}", self, on(aclHandlers.aclRoleDelete)},
	// ACL auth methods, binding rules and login (acl_auth.go).
	{"GET", "/v1/acl/auth-methods", self, on(aclHandlers.aclAuthMethodList)},
	{"PUT POST", "/v1/acl/auth-method", self, on(aclHandlers.aclAuthMethodCreate)},
	{"GET", "/v1/acl/auth-method/{name}", self, on(aclHandlers.aclAuthMethodGet)},
	{"PUT POST", "/v1/acl/auth-method/{name}", self, on(aclHandlers.aclAuthMethodUpdate)},
	{"DELETE", "/v1/acl/auth-method/{name}", self, on(aclHandlers.aclAuthMethodDelete)},
	{"GET", "/v1/acl/binding-rules", self, on(aclHandlers.aclBindingRuleList)},
	{"PUT POST", "/v1/acl/binding-rule", self, on(aclHandlers.aclBindingRuleCreate)},
	{"GET", "/v1/acl/binding-rule/{id}", self, on(aclHandlers.aclBindingRuleGet)},
	{"PUT POST", "/v1/acl/binding-rule/{id}", self, on(aclHandlers.aclBindingRuleUpdate)},
	{"DELETE", "/v1/acl/binding-rule/{id}", self, on(aclHandlers.aclBindingRuleDelete)},
	{"PUT POST", "/v1/acl/login", self, on(aclHandlers.aclLogin)},

	// Namespaces: reads need the namespace's read capability (a list
	// shows only those), writes a management token, as in Nomad.
	{"GET", "/v1/namespaces", anyToken, on(namespaceHandlers.namespaceList)}, // filtered to the caller's namespaces
	{"GET", "/v1/namespace/{name}", namespaceVisible, on(namespaceHandlers.namespaceGet)},
	{"PUT POST", "/v1/namespace/{name}", mgmt, on(namespaceHandlers.namespaceUpsert)},
	{"PUT POST", "/v1/namespace", mgmt, on(namespaceHandlers.namespaceUpsert)},
	{"DELETE", "/v1/namespace/{name}", mgmt, on(namespaceHandlers.namespaceDelete)},

	// CSI volumes need the csi-* capabilities of their namespace, plugins
	// the plugin policy, as in Nomad. A register or create checks the
	// namespaces of the body's volumes in the handler.
	{"GET", "/v1/volumes", nsCap(acl.NamespaceCapabilityCSIListVolume), on(csiHandlers.volumeList)},
	{"PUT POST", "/v1/volumes", anyToken, on(csiHandlers.volumesRegister)},
	{"GET", "/v1/volume/csi/{id}", nsCap(acl.NamespaceCapabilityCSIReadVolume), on(csiHandlers.volumeGet)},
	{"PUT POST", "/v1/volume/csi/{id}", anyToken, on(csiHandlers.volumeRegister)},
	{"DELETE", "/v1/volume/csi/{id}", nsCap(acl.NamespaceCapabilityCSIWriteVolume), on(csiHandlers.volumeDeregister)},
	{"PUT POST", "/v1/volume/csi/{id}/create", anyToken, on(csiHandlers.volumeCreate)},
	{"DELETE", "/v1/volume/csi/{id}/delete", nsCap(acl.NamespaceCapabilityCSIWriteVolume), on(csiHandlers.volumeDelete)},
	{"DELETE", "/v1/volume/csi/{id}/detach", nsCap(acl.NamespaceCapabilityCSIWriteVolume), on(csiHandlers.volumeDetach)},
	{"GET", "/v1/plugins", pluginList, on(csiHandlers.pluginList)},
	{"GET", "/v1/plugin/csi/{id}", pluginRead, on(csiHandlers.pluginGet)},

	// Nomad Variables (variables.go): read, list, write and destroy on
	// the variable's path in its namespace; a write's namespace may come
	// from its body and is checked in the handler. The keyring is
	// management only, as in Nomad.
	{"GET", "/v1/vars", varList, on(variableHandlers.varList)},
	{"GET", "/v1/var/{path...}", varRead, on(variableHandlers.varGet)},
	{"PUT POST", "/v1/var/{path...}", varWrite, on(variableHandlers.varPut)},
	{"DELETE", "/v1/var/{path...}", varDestroy, on(variableHandlers.varDelete)},
	{"GET", "/v1/operator/keyring/keys", mgmt, on(variableHandlers.keyringList)},
	{"PUT POST", "/v1/operator/keyring/rotate", mgmt, on(variableHandlers.keyringRotate)},
	{"DELETE", "/v1/operator/keyring/key/{id}", mgmt, on(variableHandlers.keyringDelete)},

	// Checked per topic and per event in the handler.
	{"GET", "/v1/event/stream", anyToken, on(eventHandlers.eventStream)},
	// Scrapers send no token; nothing in it names an object (no IDs).
	{"GET", "/v1/metrics", public, on(metricsHandlers.metricsGet)},

	// Searches: any token; each context is searched only where the
	// caller could list its objects (an explicit context it may not list
	// is refused, "all" leaves such contexts out, a list of every
	// namespace is filtered object by object).
	{"PUT POST", "/v1/search", anyToken, on(searchHandlers.prefixSearch)},
	{"PUT POST", "/v1/search/fuzzy", anyToken, on(searchHandlers.fuzzySearch)},

	{"GET", "/v1/status/leader", public, on(statusHandlers.statusLeader)},
	{"GET", "/v1/status/peers", public, on(statusHandlers.statusPeers)},
	{"GET", "/v1/regions", public, on(statusHandlers.regions)},

	{"GET", "/v1/operator/raft/configuration", opRead, on(operatorHandlers.raftConfiguration)},
	{"DELETE", "/v1/operator/raft/peer", opWrite, on(operatorHandlers.raftRemovePeer)},
	{"GET", "/v1/operator/scheduler/configuration", opRead, on(operatorHandlers.schedulerConfigGet)},
	{"PUT POST", "/v1/operator/scheduler/configuration", opWrite, on(operatorHandlers.schedulerConfigSet)},
	// Autopilot (operator_autopilot.go).
	{"GET", "/v1/operator/autopilot/configuration", opRead, on(operatorHandlers.autopilotConfigGet)},
	{"PUT POST", "/v1/operator/autopilot/configuration", opWrite, on(operatorHandlers.autopilotConfigSet)},
	{"GET", "/v1/operator/autopilot/health", opRead, on(operatorHandlers.autopilotHealth)},
	// A join token is a credential: reading one is a write's privilege.
	{"GET", "/v1/operator/join-token/{role}", opWrite, on(operatorHandlers.joinTokenGet)},
	{"PUT POST", "/v1/operator/join-token/{role}/rotate", opWrite, on(operatorHandlers.joinTokenRotate)},
	// A snapshot holds every secret of the cluster, and a restore
	// replaces the whole state: management only, as in Nomad.
	{"GET", snapshotPath, mgmt, on(operatorHandlers.snapshotSave)},
	{"PUT", snapshotPath, mgmt, on(operatorHandlers.snapshotRestore)},

	// Force GC deletes cluster state: management only, as in Nomad.
	{"PUT", "/v1/system/gc", mgmt, on(systemHandlers.systemGC)},
	{"PUT", "/v1/system/reconcile/summaries", mgmt, on(systemHandlers.systemReconcileSummaries)},

	// The web UI authorizes each page itself, with this server's resolver
	// and the same header parsing as the API (plus its cookie).
	{"", "/ui/", self, on(uiHandlers.serveUI)},
	// Nomad's UI addresses: / and /ui go to /ui/ with their query (the
	// ott of `nomad ui -authenticate` among it); they show nothing.
	{"GET", "/{$}", public, on(uiHandlers.uiRootRedirect)},
	{"GET", "/ui", public, on(uiHandlers.uiRootRedirect)},
}

// errRouteNoRule is the kind of a table entry without an ACL rule.
var errRouteNoRule = errors.New("route has no ACL rule")

// checkRoutes refuses a table with an entry that has no rule, no handler,
// no path or an unknown method, or with a pattern served twice.
func checkRoutes(table []route) error {
	seen := map[string]bool{}
	for _, rt := range table {
		name := strings.TrimSpace(rt.methods + " " + rt.path)
		if err := rt.rule.check(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if rt.handle == nil {
			return fmt.Errorf("%s: route has no handler", name)
		}
		if !strings.HasPrefix(rt.path, "/") {
			return fmt.Errorf("%s: path must start with /", name)
		}
		for _, m := range strings.Fields(rt.methods) {
			switch m {
			case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete:
			default:
				return fmt.Errorf("%s: unexpected method %q", name, m)
			}
		}
		for _, p := range rt.patterns() {
			if seen[p] {
				return fmt.Errorf("%s: pattern %q is in the route table twice", name, p)
			}
			seen[p] = true
		}
	}
	return nil
}

// routes builds the API's handler from table: every method of every entry
// is a ServeMux pattern behind the entry's rule. A bad table is a
// programming error, caught when the server is built.
func (s *HTTPServer) routes(table []route) http.Handler {
	if err := checkRoutes(table); err != nil {
		panic("httpapi: " + err.Error())
	}
	mux := http.NewServeMux()
	s.patterns = nil
	for _, rt := range table {
		inner := s.authorize(rt.rule, func(w http.ResponseWriter, r *http.Request) { rt.handle(s, w, r) })
		for _, pattern := range rt.patterns() {
			s.patterns = append(s.patterns, pattern)
			mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				setRoute(r, pattern)
				inner.ServeHTTP(w, r)
			}))
		}
	}
	return s.logRequests(limitBody(s.maxBody, s.leaderReads(mux)))
}

package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// searchHandlers serves /v1/search and /v1/search/fuzzy (Nomad's Search
// endpoint, which the CLI uses to complete ID prefixes and the web UI for
// its search box). Its handlers reach the server through the embedded
// pointer.
type searchHandlers struct{ *HTTPServer }

// Search limits, as Nomad's defaults: at most searchLimit matches per
// context (the rest is reported in Truncations), and fuzzy text of at
// least fuzzyMinTermLength characters.
const (
	searchLimit         = 20
	fuzzyMinTermLength  = 2
	maxSearchTermLength = 256
)

// Search contexts: Nomad's names (api/contexts), which are also the keys
// of Matches and Truncations.
const (
	ctxAll         = "all"
	ctxAllocs      = "allocs"
	ctxDeployments = "deployment"
	ctxEvals       = "evals"
	ctxJobs        = "jobs"
	ctxNodes       = "nodes"
	ctxNodePools   = "node_pools"
	ctxNamespaces  = "namespaces"
	ctxPlugins     = "plugins"
	ctxScaling     = "scaling_policy"
	ctxVolumes     = "volumes"
	// Fuzzy search also matches the parts of jobs, each scoped by its
	// namespace, job, group (and task).
	ctxGroups   = "groups"
	ctxTasks    = "tasks"
	ctxServices = "services"
	ctxImages   = "images"
	ctxCommands = "commands"
	ctxClasses  = "classes"
)

// prefixContexts are what "all" searches by prefix, in Nomad's order;
// fuzzyContexts what it searches fuzzily (evals and deployments have no
// names, only UUIDs, so Nomad leaves them out).
var (
	prefixContexts = []string{ctxAllocs, ctxDeployments, ctxEvals, ctxJobs, ctxNodes, ctxNodePools, ctxNamespaces, ctxPlugins, ctxScaling, ctxVolumes}
	fuzzyContexts  = []string{ctxAllocs, ctxJobs, ctxGroups, ctxTasks, ctxServices, ctxImages, ctxCommands, ctxClasses, ctxNodes, ctxNodePools, ctxNamespaces, ctxPlugins, ctxVolumes}
)

// uuidContexts hold objects named by UUID: a prefix search of "all" rounds
// an odd-length prefix down for them, as Nomad does (its UUID index reads
// whole bytes).
var uuidContexts = map[string]bool{ctxAllocs: true, ctxDeployments: true, ctxEvals: true, ctxNodes: true}

// searchRequest is the body of both searches: Prefix for /v1/search, Text
// for /v1/search/fuzzy. Namespace is the body's QueryOptions field, which
// ?namespace= overrides.
type searchRequest struct {
	Prefix    string
	Text      string
	Context   string
	Namespace string
}

// searchResponse is Nomad's SearchResponse.
type searchResponse struct {
	Matches     map[string][]string
	Truncations map[string]bool
}

// fuzzyMatch and fuzzySearchResponse are Nomad's FuzzyMatch and
// FuzzySearchResponse: the matched name, and the IDs of the objects that
// hold it (namespace, job, group, task) or, for a named object with an
// ID, its ID.
type (
	fuzzyMatch struct {
		ID    string
		Scope []string `json:",omitempty"`
	}
	fuzzySearchResponse struct {
		Matches     map[string][]fuzzyMatch
		Truncations map[string]bool
	}
)

// searchItem is one searchable thing: the string matched and the scope
// reported with it.
type searchItem struct {
	match string
	scope []string
}

// searchScope is the request's namespace and what its caller may see.
type searchScope struct {
	ns string // a namespace, or "*"
	a  *acl.ACL
}

// allowNS reports whether the caller may see objects of namespace ns that
// listing shows with capability.
func (sc searchScope) allowNS(ns, capability string) bool {
	return sc.a == nil || sc.a.AllowNamespaceOperation(ns, capability)
}

// contextCapability is the capability that listing a namespaced context's
// objects needs, as the list routes require it ("" for contexts outside
// namespaces).
var contextCapability = map[string]string{
	ctxJobs:        acl.NamespaceCapabilityListJobs,
	ctxAllocs:      acl.NamespaceCapabilityReadJob,
	ctxEvals:       acl.NamespaceCapabilityReadJob,
	ctxDeployments: acl.NamespaceCapabilityReadJob,
	ctxScaling:     acl.NamespaceCapabilityListScalingPolicies,
	ctxVolumes:     acl.NamespaceCapabilityCSIListVolume,
	// The parts of a job are what reading it shows.
	ctxGroups: acl.NamespaceCapabilityReadJob, ctxTasks: acl.NamespaceCapabilityReadJob,
	ctxServices: acl.NamespaceCapabilityReadJob, ctxImages: acl.NamespaceCapabilityReadJob,
	ctxCommands: acl.NamespaceCapabilityReadJob, ctxClasses: acl.NamespaceCapabilityReadJob,
}

// permitted reports whether the caller may search context at all: node
// read for nodes and node pools, plugin list for plugins, a rule for the
// namespace for namespaces, and for namespaced contexts the listing
// capability in the request's namespace (any namespace for "*", whose
// objects are then filtered one by one).
func (sc searchScope) permitted(context string) bool {
	a := sc.a
	if a == nil || a.IsManagement() {
		return true
	}
	switch context {
	case ctxNodes, ctxNodePools:
		return a.AllowNodeRead()
	case ctxPlugins:
		return a.AllowPluginList()
	case ctxNamespaces:
		return true // filtered to the namespaces the caller has a rule for
	}
	if sc.ns == state.AllNamespaces {
		return true
	}
	return a.AllowNamespaceOperation(sc.ns, contextCapability[context])
}

// items lists what context holds that the caller may list, every item
// matched against. prefix narrows the read where the store has an index
// for it (prefix search); fuzzy search passes "" and matches names rather
// than IDs where an object has both (allocations, nodes), scoped by the
// ID.
func (sc searchScope) items(ws memdb.WatchSet, st reader, context, prefix string, fuzzy bool) ([]searchItem, error) {
	capability := contextCapability[context]
	var out []searchItem
	add := func(ns, match string, scope ...string) {
		if capability == "" || sc.allowNS(ns, capability) {
			out = append(out, searchItem{match: match, scope: scope})
		}
	}
	switch context {
	case ctxJobs, ctxScaling, ctxGroups, ctxTasks, ctxServices, ctxImages, ctxCommands, ctxClasses:
		jobPrefix := ""
		if context == ctxJobs {
			jobPrefix = prefix
		}
		jobs, err := st.JobList(ws, sc.ns, jobPrefix)
		if err != nil {
			return nil, err
		}
		for _, j := range jobs {
			jobParts(j, context, add)
		}
	case ctxAllocs:
		allocs, err := st.AllocList(ws, sc.ns, prefix)
		if err != nil {
			return nil, err
		}
		for _, a := range allocs {
			if !fuzzy {
				add(a.Namespace, a.ID)
			} else {
				add(a.Namespace, a.Name, a.Namespace, a.ID)
			}
		}
	case ctxEvals:
		evals, err := st.EvalList(ws, sc.ns, prefix)
		if err != nil {
			return nil, err
		}
		for _, e := range evals {
			add(e.Namespace, e.ID)
		}
	case ctxDeployments:
		ds, err := st.DeploymentsByIDPrefix(ws, sc.ns, prefix)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			add(d.Namespace, d.ID)
		}
	case ctxVolumes:
		vols, err := st.CSIVolumes(ws, sc.ns, prefix, "")
		if err != nil {
			return nil, err
		}
		for _, v := range vols {
			add(v.Namespace, v.ID, v.Namespace)
		}
	case ctxNodes:
		nodes, err := st.NodeList(ws, prefix)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if !fuzzy {
				add("", n.ID)
			} else {
				add("", n.Name, n.ID)
			}
		}
	case ctxNodePools:
		pools, err := st.NodePools(ws, prefix)
		if err != nil {
			return nil, err
		}
		for _, p := range pools {
			add("", p.Name)
		}
	case ctxPlugins:
		plugins, err := st.CSIPlugins(ws, prefix)
		if err != nil {
			return nil, err
		}
		for _, p := range plugins {
			add("", p.ID)
		}
	case ctxNamespaces:
		nss, err := st.Namespaces(ws, prefix)
		if err != nil {
			return nil, err
		}
		for _, n := range nss {
			if sc.a == nil || sc.a.AllowNamespace(n.Name) {
				add("", n.Name)
			}
		}
	}
	return out, nil
}

// jobParts adds what context finds in job j: the job itself, its scaling
// policies, or its groups, tasks, services, images, commands and classes,
// each scoped by the objects that hold it.
func jobParts(j *structs.Job, context string, add func(ns, match string, scope ...string)) {
	ns := j.Namespace
	switch context {
	case ctxJobs:
		add(ns, j.ID, ns)
		return
	case ctxScaling:
		for _, p := range jobPolicies(j) {
			add(ns, p.ID)
		}
		return
	}
	for _, tg := range j.TaskGroups {
		switch context {
		case ctxGroups:
			add(ns, tg.Name, ns, j.ID)
		case ctxServices:
			for _, svc := range tg.Services {
				add(ns, svc.Name, ns, j.ID, tg.Name)
			}
		}
		for _, t := range tg.Tasks {
			switch context {
			case ctxTasks:
				add(ns, t.Name, ns, j.ID, tg.Name)
			case ctxServices:
				for _, svc := range t.Services {
					add(ns, svc.Name, ns, j.ID, tg.Name, t.Name)
				}
			case ctxImages, ctxCommands, ctxClasses:
				key := map[string]string{ctxImages: "image", ctxCommands: "command", ctxClasses: "class"}[context]
				if v, ok := t.Config[key].(string); ok && v != "" {
					add(ns, v, ns, j.ID, tg.Name, t.Name)
				}
			}
		}
	}
}

// parseSearch decodes a search body, and resolves its namespace and its
// contexts (every one the caller may search for "all"; the one named,
// which the caller must be allowed, otherwise).
func (s searchHandlers) parseSearch(r *http.Request, all []string) (searchRequest, searchScope, []string, error) {
	var req searchRequest
	if err := decodeBody(r, &req); err != nil {
		return req, searchScope{}, nil, err
	}
	sc := searchScope{ns: r.URL.Query().Get("namespace"), a: requestACL(r)}
	if sc.ns == "" {
		sc.ns = req.Namespace
	}
	if sc.ns == "" {
		sc.ns = structs.DefaultNamespace
	}
	if req.Context == "" {
		return req, sc, nil, badRequest("Context: missing; must be %q or one of %s", ctxAll, strings.Join(all, ", "))
	}
	if req.Context == ctxAll {
		var contexts []string
		for _, c := range all {
			if sc.permitted(c) {
				contexts = append(contexts, c)
			}
		}
		return req, sc, contexts, nil
	}
	if !slices.Contains(all, req.Context) {
		return req, sc, nil, badRequest("Context: %q is not searchable; must be %q or one of %s", req.Context, ctxAll, strings.Join(all, ", "))
	}
	if !sc.permitted(req.Context) {
		return req, sc, nil, errPermissionDenied
	}
	return req, sc, []string{req.Context}, nil
}

// searchIndex is the highest index of the tables the contexts read.
func searchIndex(st reader) uint64 {
	var idx uint64
	for _, t := range []string{state.TableJobs, state.TableAllocs, state.TableEvals, state.TableNodes, state.TableDeployments,
		state.TableNodePools, state.TableNamespaces, state.TableCSIVolumes, state.TableCSIPlugins} {
		idx = max(idx, st.Index(t))
	}
	return idx
}

// prefixSearch is PUT/POST /v1/search: the IDs of each context that start
// with Prefix, at most searchLimit each, sorted.
func (s searchHandlers) prefixSearch(w http.ResponseWriter, r *http.Request) {
	req, sc, contexts, err := s.parseSearch(r, prefixContexts)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if len(req.Prefix) > maxSearchTermLength {
		s.writeError(w, badRequest("Prefix: %d bytes, more than %d", len(req.Prefix), maxSearchTermLength))
		return
	}
	resp := searchResponse{Matches: map[string][]string{}, Truncations: map[string]bool{}}
	st := s.srv.State()
	for _, c := range contexts {
		prefix := req.Prefix
		if req.Context == ctxAll && uuidContexts[c] && len(prefix)%2 == 1 {
			prefix = prefix[:len(prefix)-1]
		}
		items, err := sc.items(nil, st, c, prefix, false)
		if err != nil {
			s.writeError(w, err)
			return
		}
		ids := []string{}
		for _, it := range items {
			if strings.HasPrefix(it.match, prefix) && !slices.Contains(ids, it.match) {
				ids = append(ids, it.match)
			}
		}
		slices.Sort(ids)
		resp.Matches[c], resp.Truncations[c] = truncate(ids)
	}
	writeWrite(w, r, searchIndex(st), resp)
}

// fuzzySearch is PUT/POST /v1/search/fuzzy: the names of each context
// that contain Text, case-insensitively, best first (a match earlier in
// the name, then a shorter name, then by name), at most searchLimit each.
func (s searchHandlers) fuzzySearch(w http.ResponseWriter, r *http.Request) {
	req, sc, contexts, err := s.parseSearch(r, fuzzyContexts)
	if err != nil {
		s.writeError(w, err)
		return
	}
	switch text := strings.TrimSpace(req.Text); {
	case len(text) < fuzzyMinTermLength:
		s.writeError(w, badRequest("Text: %q is shorter than the minimum of %d characters", req.Text, fuzzyMinTermLength))
		return
	case len(text) > maxSearchTermLength:
		s.writeError(w, badRequest("Text: %d bytes, more than %d", len(text), maxSearchTermLength))
		return
	}
	text := strings.ToLower(strings.TrimSpace(req.Text))
	resp := fuzzySearchResponse{Matches: map[string][]fuzzyMatch{}, Truncations: map[string]bool{}}
	st := s.srv.State()
	for _, c := range contexts {
		items, err := sc.items(nil, st, c, "", true)
		if err != nil {
			s.writeError(w, err)
			return
		}
		type scored struct {
			fuzzyMatch
			at int
		}
		var found []scored
		seen := map[string]bool{}
		for _, it := range items {
			at := strings.Index(strings.ToLower(it.match), text)
			key := fmt.Sprint(it.match, it.scope)
			if at < 0 || seen[key] {
				continue
			}
			seen[key] = true
			found = append(found, scored{fuzzyMatch{ID: it.match, Scope: it.scope}, at})
		}
		slices.SortFunc(found, func(a, b scored) int {
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(len(a.ID), len(b.ID)), cmp.Compare(a.ID, b.ID),
				slices.Compare(a.Scope, b.Scope))
		})
		matches := make([]fuzzyMatch, 0, min(len(found), searchLimit))
		for _, f := range found {
			matches = append(matches, f.fuzzyMatch)
		}
		resp.Matches[c], resp.Truncations[c] = truncate(matches)
	}
	writeWrite(w, r, searchIndex(st), resp)
}

// truncate keeps the first searchLimit items and reports whether it
// dropped any.
func truncate[T any](items []T) ([]T, bool) {
	if len(items) > searchLimit {
		return items[:searchLimit], true
	}
	return items, false
}

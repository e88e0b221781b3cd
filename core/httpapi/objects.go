package httpapi

import (
	"net/http"
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// objectHandlers serves the allocation, evaluation and node routes
// (/v1/allocations, /v1/evaluations, /v1/nodes and their objects by ID). Its
// handlers reach the server through the embedded pointer.
type objectHandlers struct{ *HTTPServer }

// Allocation, evaluation and node endpoints. Single-object reads report the
// object's ModifyIndex in X-Nomad-Index (as Nomad does), lists the table's.

// allocList is GET /v1/allocations. As Nomad's, a row carries its
// AllocatedResources only with ?resources=true.
func (s objectHandlers) allocList(w http.ResponseWriter, r *http.Request) {
	withResources, err := parseBool(r, "resources")
	if err != nil {
		s.writeError(w, err)
		return
	}
	view := allocStubs
	if !withResources {
		view = func(allocs []*structs.Allocation) []*structs.AllocListStub {
			stubs := allocStubs(allocs)
			for _, st := range stubs {
				st.AllocatedResources = nil // a stub is a fresh value: the stored alloc keeps its own
			}
			return stubs
		}
	}
	allow := nsFilter(r, acl.NamespaceCapabilityReadJob)
	readListExact(s.HTTPServer, w, r, state.TableAllocs, view, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Allocation, error) {
		allocs, err := st.AllocList(ws, q.Namespace, q.Prefix)
		return filterNS(allocs, allocNS, allow), err
	})
}

func (s objectHandlers) allocGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	view := allocView(r)
	readObject(s.HTTPServer, w, r, state.TableAllocs, "alloc not found",
		func(a *structs.Allocation) (uint64, any) { return a.ModifyIndex, view(a) },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.Allocation, error) {
			a, err := st.AllocByID(ws, id)
			// Another namespace's allocation is as good as missing.
			if a != nil && !allowNS(r, a.Namespace, acl.NamespaceCapabilityReadJob) {
				return nil, err
			}
			return a, err
		})
}

func (s objectHandlers) allocStop(w http.ResponseWriter, r *http.Request) {
	if requestACL(r) != nil {
		a, err := s.srv.State().AllocByID(nil, r.PathValue("id"))
		if err != nil {
			s.writeError(w, err)
			return
		}
		// A missing allocation is the server's 404, to every caller.
		if a != nil && !allowNS(r, a.Namespace, acl.NamespaceCapabilityAllocLifecycle) {
			s.writeError(w, errPermissionDenied)
			return
		}
	}
	resp, err := s.nodes.StopAlloc(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// evalList is GET /v1/evaluations, in creation order, a page at a time
// with ?per_page= and ?next_token= (see evalPage).
func (s objectHandlers) evalList(w http.ResponseWriter, r *http.Request) {
	page, err := parseEvalPage(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	allow := nsFilter(r, acl.NamespaceCapabilityReadJob)
	// The query runs in this handler's goroutine, before the answer is
	// written: the next-token header of its last run is sent.
	view := func(evals []*structs.Evaluation) []*structs.Evaluation { return page.apply(w, sortEvals(evals)) }
	readListExact(s.HTTPServer, w, r, state.TableEvals, view, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Evaluation, error) {
		evals, err := st.EvalList(ws, q.Namespace, q.Prefix)
		return filterNS(evals, evalNS, allow), err
	})
}

func (s objectHandlers) evalGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	readObject(s.HTTPServer, w, r, state.TableEvals, "eval not found",
		func(e *structs.Evaluation) (uint64, any) { return e.ModifyIndex, e },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.Evaluation, error) {
			e, err := st.EvalByID(ws, id)
			if e != nil && !allowNS(r, e.Namespace, acl.NamespaceCapabilityReadJob) {
				return nil, err
			}
			return e, err
		})
}

func (s objectHandlers) evalAllocs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	allow := nsFilter(r, acl.NamespaceCapabilityReadJob)
	readListExact(s.HTTPServer, w, r, state.TableAllocs, allocStubs, func(ws memdb.WatchSet, st reader, _ queryOptions) ([]*structs.Allocation, error) {
		allocs, err := st.AllocsByEval(ws, id)
		return filterNS(allocs, allocNS, allow), err
	})
}

func (s objectHandlers) nodeList(w http.ResponseWriter, r *http.Request) {
	withResources, err := parseBool(r, "resources")
	if err != nil {
		s.writeError(w, err)
		return
	}
	view := nodeStubs
	if withResources {
		// As Nomad's ?resources=true: each stub with the node's resources.
		view = func(nodes []*structs.Node) []*structs.NodeListStub {
			stubs := nodeStubs(nodes)
			byID := make(map[string]*structs.Node, len(nodes))
			for _, n := range nodes {
				byID[n.ID] = n
			}
			for _, st := range stubs {
				if n := byID[st.ID]; n != nil {
					st.NodeResources, st.ReservedResources = n.NodeResources, n.ReservedResources // read-only: only encoded
					if st.ReservedResources == nil {
						// Nothing reserved: an empty block, as Nomad's
						// (its clients dereference it).
						st.ReservedResources = &structs.NodeReservedResources{}
					}
				}
			}
			return stubs
		}
	}
	readList(s.HTTPServer, w, r, state.TableNodes, view, func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.Node, error) {
		return st.NodeList(ws, q.Prefix)
	})
}

func (s objectHandlers) nodeGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	readObject(s.HTTPServer, w, r, state.TableNodes, "node not found",
		func(n *structs.Node) (uint64, any) { return n.ModifyIndex, newNodeJSON(n) },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.Node, error) {
			return st.NodeByID(ws, id)
		})
}

// nodeAllocs answers with full allocations, as Nomad does: the client
// agent's watcher needs them.
func (s objectHandlers) nodeAllocs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	allow := nsFilter(r, acl.NamespaceCapabilityReadJob)
	view := allocView(r)
	readList(s.HTTPServer, w, r, state.TableAllocs, func(allocs []*structs.Allocation) []*structs.Allocation {
		out := sortAllocs(allocs)
		for i, a := range out {
			out[i] = view(a)
		}
		return out
	}, func(ws memdb.WatchSet, st reader, _ queryOptions) ([]*structs.Allocation, error) {
		allocs, err := st.AllocsByNode(ws, id)
		return filterNS(allocs, allocNS, allow), err
	})
}

// nodeEligibilityRequest is the body of POST /v1/node/:id/eligibility.
type nodeEligibilityRequest struct {
	Eligibility string
}

func (s objectHandlers) nodeEligibility(w http.ResponseWriter, r *http.Request) {
	var req nodeEligibilityRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	switch req.Eligibility {
	case structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible:
	case "":
		s.writeError(w, badRequest("Eligibility: missing; must be %q or %q", structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible))
		return
	default:
		s.writeError(w, badRequest("Eligibility: invalid value %q; must be %q or %q", req.Eligibility, structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible))
		return
	}
	resp, err := s.nodes.UpdateEligibility(r.Context(), r.PathValue("id"), req.Eligibility)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// nodeDrainRequest is the body of POST /v1/node/:id/drain; a null DrainSpec
// ends the drain.
type nodeDrainRequest struct {
	DrainSpec    *structs.DrainSpec
	MarkEligible bool
	Meta         map[string]string
}

func (s objectHandlers) nodeDrain(w http.ResponseWriter, r *http.Request) {
	var req nodeDrainRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.nodes.UpdateDrain(r.Context(), r.PathValue("id"), req.DrainSpec, req.MarkEligible, req.Meta)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// nodeJSON is a node as the HTTP API shows it (§0): the SecretID blanked,
// a synthetic Drain flag added, and Nomad's legacy Resources and Reserved
// blocks beside NodeResources (Nomad 1.6's `node status` dereferences
// them; see structs.Node.LegacyResources).
type nodeJSON struct {
	*structs.Node
	Drain     bool
	Resources *structs.LegacyResources
	Reserved  *structs.LegacyResources
}

func newNodeJSON(n *structs.Node) nodeJSON {
	c := *n // stored nodes are shared: blank the secret on a copy
	c.SecretID = ""
	res, reserved := n.LegacyResources()
	return nodeJSON{Node: &c, Drain: n.DrainStrategy != nil, Resources: res, Reserved: reserved}
}

// nodeStubs converts nodes to list stubs ordered by creation.
func nodeStubs(nodes []*structs.Node) []*structs.NodeListStub {
	stubs := make([]*structs.NodeListStub, 0, len(nodes))
	for _, n := range nodes {
		stubs = append(stubs, n.Stub())
	}
	return byCreation(stubs, func(n *structs.NodeListStub) (uint64, string) { return n.CreateIndex, n.ID })
}

// allocStubs converts allocs to list stubs ordered by creation.
func allocStubs(allocs []*structs.Allocation) []*structs.AllocListStub {
	stubs := make([]*structs.AllocListStub, 0, len(allocs))
	for _, a := range allocs {
		stubs = append(stubs, a.Stub())
	}
	return byCreation(stubs, func(a *structs.AllocListStub) (uint64, string) { return a.CreateIndex, a.ID })
}

// sortAllocs returns allocs ordered by creation, never nil. The state's
// slice is copied: it is shared with the store.
func sortAllocs(allocs []*structs.Allocation) []*structs.Allocation {
	out := append([]*structs.Allocation{}, allocs...)
	return byCreation(out, func(a *structs.Allocation) (uint64, string) { return a.CreateIndex, a.ID })
}

// sortEvals returns evals ordered by creation, never nil. The state's
// slice is copied: it is shared with the store.
func sortEvals(evals []*structs.Evaluation) []*structs.Evaluation {
	out := append([]*structs.Evaluation{}, evals...)
	return byCreation(out, func(e *structs.Evaluation) (uint64, string) { return e.CreateIndex, e.ID })
}

// byCreation sorts objs in place by creation index, then by ID for a
// stable order among the objects of one Raft entry, and returns them. key
// reads an object's creation index and ID.
func byCreation[T any](objs []T, key func(T) (createIndex uint64, id string)) []T {
	sort.SliceStable(objs, func(a, b int) bool {
		ia, ida := key(objs[a])
		ib, idb := key(objs[b])
		if ia != ib {
			return ia < ib
		}
		return ida < idb
	})
	return objs
}

func allocNS(a *structs.Allocation) string { return a.Namespace }
func evalNS(e *structs.Evaluation) string  { return e.Namespace }

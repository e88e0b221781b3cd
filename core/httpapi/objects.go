package httpapi

import (
	"net/http"
	"sort"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// Allocation, evaluation and node endpoints. Single-object reads report the
// object's ModifyIndex in X-Nomad-Index (as Nomad does), lists the table's.

func (s *HTTPServer) allocList(w http.ResponseWriter, r *http.Request) {
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			allocs, err := st.AllocList(ws, q.Namespace, q.Prefix)
			if err != nil {
				return 0, nil, err
			}
			return st.Index(state.TableAllocs), allocStubs(allocs), nil
		}
	})
}

func (s *HTTPServer) allocGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			a, err := st.AllocByID(ws, id)
			if err != nil {
				return 0, nil, err
			}
			if a == nil {
				return st.Index(state.TableAllocs), notFound("alloc not found"), nil
			}
			return a.ModifyIndex, a, nil
		}
	})
}

func (s *HTTPServer) allocStop(w http.ResponseWriter, r *http.Request) {
	resp, err := s.srv.StopAlloc(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

func (s *HTTPServer) evalList(w http.ResponseWriter, r *http.Request) {
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			evals, err := st.EvalList(ws, q.Namespace, q.Prefix)
			if err != nil {
				return 0, nil, err
			}
			return st.Index(state.TableEvals), sortEvals(evals), nil
		}
	})
}

func (s *HTTPServer) evalGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			e, err := st.EvalByID(ws, id)
			if err != nil {
				return 0, nil, err
			}
			if e == nil {
				return st.Index(state.TableEvals), notFound("eval not found"), nil
			}
			return e.ModifyIndex, e, nil
		}
	})
}

func (s *HTTPServer) evalAllocs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			allocs, err := st.AllocsByEval(ws, id)
			if err != nil {
				return 0, nil, err
			}
			return st.Index(state.TableAllocs), allocStubs(allocs), nil
		}
	})
}

func (s *HTTPServer) nodeList(w http.ResponseWriter, r *http.Request) {
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			nodes, err := st.NodeList(ws, q.Prefix)
			if err != nil {
				return 0, nil, err
			}
			stubs := make([]*structs.NodeListStub, 0, len(nodes))
			for _, n := range nodes {
				stubs = append(stubs, n.Stub())
			}
			sort.SliceStable(stubs, func(a, b int) bool {
				return lessByIndex(stubs[a].CreateIndex, stubs[b].CreateIndex, stubs[a].ID, stubs[b].ID)
			})
			return st.Index(state.TableNodes), stubs, nil
		}
	})
}

func (s *HTTPServer) nodeGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			n, err := st.NodeByID(ws, id)
			if err != nil {
				return 0, nil, err
			}
			if n == nil {
				return st.Index(state.TableNodes), notFound("node not found"), nil
			}
			return n.ModifyIndex, newNodeJSON(n), nil
		}
	})
}

func (s *HTTPServer) nodeAllocs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			allocs, err := st.AllocsByNode(ws, id)
			if err != nil {
				return 0, nil, err
			}
			// Nomad answers this endpoint with full allocations: the
			// client agent's watcher needs them.
			out := append([]*structs.Allocation{}, allocs...)
			sort.SliceStable(out, func(a, b int) bool {
				return lessByIndex(out[a].CreateIndex, out[b].CreateIndex, out[a].ID, out[b].ID)
			})
			return st.Index(state.TableAllocs), out, nil
		}
	})
}

// nodeEligibilityRequest is the body of POST /v1/node/:id/eligibility.
type nodeEligibilityRequest struct {
	Eligibility string
}

func (s *HTTPServer) nodeEligibility(w http.ResponseWriter, r *http.Request) {
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
	resp, err := s.srv.UpdateNodeEligibility(r.Context(), r.PathValue("id"), req.Eligibility)
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

func (s *HTTPServer) nodeDrain(w http.ResponseWriter, r *http.Request) {
	var req nodeDrainRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	resp, err := s.srv.UpdateNodeDrain(r.Context(), r.PathValue("id"), req.DrainSpec, req.MarkEligible, req.Meta)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// nodeJSON is a node as the HTTP API shows it (§0): the SecretID blanked and
// a synthetic Drain flag added.
type nodeJSON struct {
	*structs.Node
	Drain bool
}

func newNodeJSON(n *structs.Node) nodeJSON {
	c := *n // stored nodes are shared: blank the secret on a copy
	c.SecretID = ""
	return nodeJSON{Node: &c, Drain: n.DrainStrategy != nil}
}

// allocStubs converts allocs to list stubs ordered by creation.
func allocStubs(allocs []*structs.Allocation) []*structs.AllocListStub {
	stubs := make([]*structs.AllocListStub, 0, len(allocs))
	for _, a := range allocs {
		stubs = append(stubs, a.Stub())
	}
	sort.SliceStable(stubs, func(a, b int) bool {
		return lessByIndex(stubs[a].CreateIndex, stubs[b].CreateIndex, stubs[a].ID, stubs[b].ID)
	})
	return stubs
}

// sortEvals returns evals ordered by creation, never nil.
func sortEvals(evals []*structs.Evaluation) []*structs.Evaluation {
	out := append([]*structs.Evaluation{}, evals...)
	sort.SliceStable(out, func(a, b int) bool {
		return lessByIndex(out[a].CreateIndex, out[b].CreateIndex, out[a].ID, out[b].ID)
	})
	return out
}

// lessByIndex orders by creation index, then ID for a stable order among
// objects of one Raft entry.
func lessByIndex(ia, ib uint64, ida, idb string) bool {
	if ia != ib {
		return ia < ib
	}
	return ida < idb
}

package httpapi

import (
	"context"
	"net/http"
	"sort"
	"strconv"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// nodePoolHandlers serves the node pool routes (/v1/node/pools,
// /v1/node/pool/*) and the /v1/node/{id}/{sub} pattern they share with a
// node's allocations. Its handlers reach the server through the embedded
// pointer.
type nodePoolHandlers struct{ *HTTPServer }

// NodePoolsAPI (Config.NodePools) writes node pools.
type NodePoolsAPI interface {
	Upsert(ctx context.Context, pools []*structs.NodePool) (uint64, error)
	Delete(ctx context.Context, name string) (uint64, error)
}

// nodePoolReader is the read side of the state the node pool routes use.
type nodePoolReader interface {
	NodePoolByName(ws memdb.WatchSet, name string) (*structs.NodePool, error)
	NodePools(ws memdb.WatchSet, prefix string) ([]*structs.NodePool, error)
	NodesByPool(ws memdb.WatchSet, pool string) ([]*structs.Node, error)
	JobsByNodePool(ws memdb.WatchSet, ns, pool string) ([]*structs.Job, error)
}

// nodeSub serves GET /v1/node/pool/{name} and GET /v1/node/{id}/allocations.
func (s nodePoolHandlers) nodeSub(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.PathValue("id") == "pool":
		s.nodePoolGet(w, r, r.PathValue("sub"))
	case r.PathValue("sub") == "allocations":
		objectHandlers(s).nodeAllocs(w, r)
	case r.PathValue("sub") == "drain" || r.PathValue("sub") == "eligibility":
		// Served for POST and PUT only, as the mux would answer.
		w.Header().Set("Allow", "POST, PUT")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
	default:
		http.NotFound(w, r)
	}
}

// nodePoolList answers the pools by name, a page at a time with Nomad's
// ?per_page= and ?next_token= (the name to start at); X-Nomad-NextToken
// names the first pool of the next page.
func (s nodePoolHandlers) nodePoolList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	perPage := 0
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.writeError(w, badRequest("per_page: %q is not a non-negative integer", v))
			return
		}
		perPage = n
	}
	next := q.Get("next_token")
	if len(next) > structs.MaxIdentifierBytes {
		s.writeError(w, badRequest("next_token: longer than %d bytes", structs.MaxIdentifierBytes))
		return
	}
	readList(s.HTTPServer, w, r, state.TableNodePools, func(p []*structs.NodePool) any { return p },
		func(ws memdb.WatchSet, st reader, q queryOptions) ([]*structs.NodePool, error) {
			pools, err := st.NodePools(ws, q.Prefix)
			if err != nil {
				return nil, err
			}
			// The query runs in this handler's goroutine, before the
			// answer is written: the header of its last run is sent.
			w.Header().Del(headerNextToken)
			start := sort.Search(len(pools), func(i int) bool { return pools[i].Name >= next })
			pools = pools[start:]
			if perPage > 0 && len(pools) > perPage {
				w.Header().Set(headerNextToken, pools[perPage].Name)
				pools = pools[:perPage]
			}
			return pools, nil
		})
}

func (s nodePoolHandlers) nodePoolGet(w http.ResponseWriter, r *http.Request, name string) {
	readObject(s.HTTPServer, w, r, state.TableNodePools, "node pool not found",
		func(p *structs.NodePool) (uint64, any) { return max(p.ModifyIndex, 1), p },
		func(ws memdb.WatchSet, st reader, _ queryOptions) (*structs.NodePool, error) {
			return st.NodePoolByName(ws, name)
		})
}

// nodePoolNodes lists the node stubs of a pool (every node for "all").
func (s nodePoolHandlers) nodePoolNodes(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			index := max(st.Index(state.TableNodes), st.Index(state.TableNodePools))
			p, err := st.NodePoolByName(ws, name)
			if err != nil {
				return 0, nil, err
			}
			if p == nil {
				return index, notFound("node pool not found"), nil
			}
			nodes, err := st.NodesByPool(ws, name)
			if err != nil {
				return 0, nil, err
			}
			if q.Prefix != "" {
				nodes = filterPrefix(nodes, q.Prefix)
			}
			return index, nodeStubs(nodes), nil
		}
	})
}

func filterPrefix(nodes []*structs.Node, prefix string) []*structs.Node {
	out := nodes[:0:0]
	for _, n := range nodes {
		if len(n.ID) >= len(prefix) && n.ID[:len(prefix)] == prefix {
			out = append(out, n)
		}
	}
	return out
}

// nodePoolJobs lists the job stubs of a pool in the request's namespace
// ("*": every namespace the caller may list jobs in).
func (s nodePoolHandlers) nodePoolJobs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	allow := nsFilter(r, acl.NamespaceCapabilityListJobs)
	s.blockingRead(w, r, func(q queryOptions) readFunc {
		return func(ws memdb.WatchSet, st reader) (uint64, any, error) {
			index := max(st.Index(state.TableJobs), st.Index(state.TableJobSummary), st.Index(state.TableNodePools))
			p, err := st.NodePoolByName(ws, name)
			if err != nil {
				return 0, nil, err
			}
			if p == nil {
				return index, notFound("node pool not found"), nil
			}
			jobs, err := st.JobsByNodePool(ws, q.Namespace, name)
			if err != nil {
				return 0, nil, err
			}
			jobs = filterNS(jobs, func(j *structs.Job) string { return j.Namespace }, allow)
			stubs := make(jobStubs, 0, len(jobs))
			for _, j := range jobs {
				sum, err := st.JobSummaryByID(ws, j.Namespace, j.ID)
				if err != nil {
					return 0, nil, err
				}
				stubs = append(stubs, j.Stub(sum, false))
			}
			sort.SliceStable(stubs, func(a, b int) bool {
				if stubs[a].ID != stubs[b].ID {
					return stubs[a].ID < stubs[b].ID
				}
				return stubs[a].Namespace < stubs[b].Namespace
			})
			return index, stubs, nil
		}
	})
}

func (s nodePoolHandlers) nodePoolServer(w http.ResponseWriter) (NodePoolsAPI, bool) {
	ps := s.nodePools
	if ps == nil || s.srv == nil {
		writeText(w, http.StatusNotImplemented, "This agent's server does not write node pools")
		return nil, false
	}
	return ps, true
}

// nodePoolUpsert is PUT /v1/node/pools with the NodePool as the body.
func (s nodePoolHandlers) nodePoolUpsert(w http.ResponseWriter, r *http.Request) {
	ps, ok := s.nodePoolServer(w)
	if !ok {
		return
	}
	var p structs.NodePool
	if err := decodeBody(r, &p); err != nil {
		s.writeError(w, err)
		return
	}
	idx, err := ps.Upsert(r.Context(), []*structs.NodePool{&p})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}

func (s nodePoolHandlers) nodePoolDelete(w http.ResponseWriter, r *http.Request) {
	ps, ok := s.nodePoolServer(w)
	if !ok {
		return
	}
	idx, err := ps.Delete(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, idx, struct{ Index uint64 }{idx})
}

package httpapi

import (
	"context"
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// adminHandlers serves the cluster maintenance writes Nomad's CLI uses
// beyond the everyday ones: eval delete, node evaluate and node purge.
// Its handlers reach the server through the embedded pointer.
type adminHandlers struct{ *HTTPServer }

// EvalDeleter is implemented by a Server that deletes evaluations
// (DELETE /v1/evaluations); without it the route answers 501.
type EvalDeleter interface {
	DeleteEvals(ctx context.Context, ids []string, filter string) (*structs.EvalDeleteResponse, error)
}

// NodeAdmin is implemented by a NodesAPI that evaluates and purges nodes
// (POST /v1/node/<id>/evaluate and /purge); without it they answer 501.
type NodeAdmin interface {
	Evaluate(ctx context.Context, nodeID string) (*structs.NodeEligibilityUpdateResponse, error)
	Purge(ctx context.Context, nodeID string) (*structs.NodeEligibilityUpdateResponse, error)
}

// evalDeleteRequest is Nomad's EvalDeleteRequest.
type evalDeleteRequest struct {
	EvalIDs []string
	Filter  string
}

// evalDelete is DELETE /v1/evaluations (`nomad eval delete`), management
// only as in Nomad. Which evals may go is the server's rule (see
// server.DeleteEvals).
func (s adminHandlers) evalDelete(w http.ResponseWriter, r *http.Request) {
	var req evalDeleteRequest
	if err := decodeBody(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	d, ok := s.srv.(EvalDeleter)
	if !ok {
		writeText(w, http.StatusNotImplemented, "this agent does not delete evaluations")
		return
	}
	resp, err := d.DeleteEvals(r.Context(), req.EvalIDs, req.Filter)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

// nodeEvalResponse is Nomad's NodeUpdateResponse as node evaluate
// answers it, with EvalID (the first eval's), which Nomad's client reads.
type nodeEvalResponse struct {
	*structs.NodeEligibilityUpdateResponse
	EvalID string
}

// nodeEvaluate is POST /v1/node/<id>/evaluate: node write.
func (s adminHandlers) nodeEvaluate(w http.ResponseWriter, r *http.Request) {
	a, ok := s.nodes.(NodeAdmin)
	if !ok {
		writeText(w, http.StatusNotImplemented, "this agent does not evaluate nodes")
		return
	}
	resp, err := a.Evaluate(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	out := nodeEvalResponse{NodeEligibilityUpdateResponse: resp}
	if len(resp.EvalIDs) > 0 {
		out.EvalID = resp.EvalIDs[0]
	}
	writeWrite(w, r, resp.Index, out)
}

// nodePurge is POST /v1/node/<id>/purge: node write, as in Nomad.
func (s adminHandlers) nodePurge(w http.ResponseWriter, r *http.Request) {
	a, ok := s.nodes.(NodeAdmin)
	if !ok {
		writeText(w, http.StatusNotImplemented, "this agent does not purge nodes")
		return
	}
	resp, err := a.Purge(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeWrite(w, r, resp.Index, resp)
}

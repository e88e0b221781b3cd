package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/client/clientapi"
	"github.com/drover-org/drover/core/httpapi/jsoninput"
	"github.com/drover-org/drover/core/structs"
)

// clientHandlers serves the client-side API beyond logs (/v1/client/fs/*,
// stats, allocation restart/signal/checks, node metadata): on the agent
// whose client holds the allocation (or is the node), or forwarded to
// that node's HTTP address when asked of another agent, as Nomad's.
type clientHandlers struct{ *HTTPServer }

// What the local client serves to each area; the agent's *client.Client
// implements them all. A ClientAPI without one answers 503 there.
type (
	clientFS interface {
		AllocFSList(allocID, path string) ([]*clientapi.FileInfo, error)
		AllocFSStat(allocID, path string) (*clientapi.FileInfo, error)
		AllocFSOpen(allocID, path string) (*os.File, error)
		AllocFSStream(allocID, path, origin string, offset int64) (clientapi.FileStream, error)
	}
	clientStats interface {
		HostStats() (*clientapi.HostStats, error)
		AllocStats(allocID string) (*clientapi.AllocResourceUsage, error)
	}
	clientLifecycle interface {
		RestartAlloc(ctx context.Context, allocID, task string, allTasks bool) error
		SignalAlloc(ctx context.Context, allocID, task, signal string) error
	}
	clientChecks interface {
		AllocChecks(allocID string) (map[string]*structs.CheckStatus, error)
	}
	clientNode interface {
		NodeID() string
	}
	clientMeta interface {
		NodeMeta() *clientapi.NodeMetaResponse
		ApplyNodeMeta(update map[string]*string) (*clientapi.NodeMetaResponse, error)
	}
)

// maxIDBytes bounds an allocation or node ID taken from a request.
const maxIDBytes = 128

var errNoClientSupport = structs.NewError(structs.ErrUnavailable, "this agent's client does not serve this endpoint")

// allowAlloc reports whether the caller has capability in the namespace
// of allocID, found in the state store or, on a client-only agent, in the
// client. An allocation found nowhere is allowed only to a management
// token (which then gets its 404).
func (s clientHandlers) allowAlloc(r *http.Request, allocID, capability string) bool {
	a := requestACL(r)
	if a == nil || a.IsManagement() {
		return true
	}
	if s.srv != nil {
		if al, err := s.srv.State().AllocByID(nil, allocID); err == nil && al != nil {
			return allowNS(r, al.Namespace, capability)
		}
	}
	if c, ok := s.client.(allocNamespacer); ok {
		if ns, ok := c.AllocNamespace(allocID); ok {
			return allowNS(r, ns, capability)
		}
	}
	return false
}

// onAlloc authorizes a request about the path's allocation with
// capability, then serves it with local when this agent's client holds
// the allocation, else forwards it to the allocation's node. An unknown
// allocation is a 404.
func (s clientHandlers) onAlloc(w http.ResponseWriter, r *http.Request, capability string, local func(allocID string)) {
	allocID := r.PathValue("alloc")
	if allocID == "" || len(allocID) > maxIDBytes {
		s.writeError(w, badRequest("allocation ID: must be 1 to %d bytes", maxIDBytes))
		return
	}
	if !s.allowAlloc(r, allocID, capability) {
		s.writeError(w, errPermissionDenied)
		return
	}
	if c, ok := s.client.(allocNamespacer); ok {
		if _, held := c.AllocNamespace(allocID); held {
			local(allocID)
			return
		}
	}
	if r.Header.Get(headerForwarded) != "" || s.srv == nil {
		s.writeError(w, structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID))
		return
	}
	logHandlers(s).forwardLogs(w, r, allocID, nil)
}

// onNode serves a request about the node named by ?node_id= (this
// agent's own node when empty) with local, or forwards it to that node.
func (s clientHandlers) onNode(w http.ResponseWriter, r *http.Request, local func()) {
	nodeID := r.URL.Query().Get("node_id")
	if len(nodeID) > maxIDBytes {
		s.writeError(w, badRequest("node_id: at most %d bytes", maxIDBytes))
		return
	}
	if c, ok := s.client.(clientNode); ok && (nodeID == "" || nodeID == c.NodeID()) {
		local()
		return
	}
	switch {
	case nodeID == "":
		s.writeError(w, badRequest("node_id: required, as this agent runs no client"))
	case r.Header.Get(headerForwarded) != "" || s.srv == nil:
		s.writeError(w, structs.NewError(structs.ErrNotFound, "Unknown node %q", nodeID))
	default:
		s.forwardToNode(w, r, nodeID)
	}
}

// forwardToNode proxies the request to the HTTP address of nodeID.
func (s clientHandlers) forwardToNode(w http.ResponseWriter, r *http.Request, nodeID string) {
	var addr string
	var lookupErr error
	_, err := s.query(r.Context(), 0, func(ws memdb.WatchSet, st reader) (uint64, error) {
		n, err := st.NodeByID(ws, nodeID)
		switch {
		case err != nil:
			return 0, err
		case n == nil:
			lookupErr = structs.NewError(structs.ErrNotFound, "Unknown node %q", nodeID)
		case n.HTTPAddr == "":
			lookupErr = structs.NewError(structs.ErrUnavailable, "node %q advertises no HTTP address", nodeID)
		default:
			addr = n.HTTPAddr
		}
		return 1, nil
	})
	if err == nil {
		err = lookupErr
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	scheme := "http"
	if s.leaderScheme != "" {
		scheme = s.leaderScheme
	}
	target := &url.URL{Scheme: scheme, Host: addr}
	proxy := &httputil.ReverseProxy{
		Transport: s.leaderTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(headerForwarded, "1")
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.writeError(w, structs.NewError(structs.ErrUnavailable, "forwarding request to node at %s: %v", addr, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

// clientStats serves GET /v1/client/stats[?node_id=].
func (s clientHandlers) clientStats(w http.ResponseWriter, r *http.Request) {
	s.onNode(w, r, func() {
		c, ok := s.client.(clientStats)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		st, err := c.HostStats()
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, st)
	})
}

// allocStats serves GET /v1/client/allocation/<id>/stats: read-job.
func (s clientHandlers) allocStats(w http.ResponseWriter, r *http.Request) {
	s.onAlloc(w, r, acl.NamespaceCapabilityReadJob, func(allocID string) {
		c, ok := s.client.(clientStats)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		u, err := c.AllocStats(allocID)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, u)
	})
}

// allocChecks serves GET /v1/client/allocation/<id>/checks: read-job.
func (s clientHandlers) allocChecks(w http.ResponseWriter, r *http.Request) {
	s.onAlloc(w, r, acl.NamespaceCapabilityReadJob, func(allocID string) {
		c, ok := s.client.(clientChecks)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		res, err := c.AllocChecks(allocID)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, res)
	})
}

// allocRestart serves PUT /v1/client/allocation/<id>/restart
// ({"TaskName", "AllTasks"}): alloc-lifecycle.
func (s clientHandlers) allocRestart(w http.ResponseWriter, r *http.Request) {
	s.onAlloc(w, r, acl.NamespaceCapabilityAllocLifecycle, func(allocID string) {
		c, ok := s.client.(clientLifecycle)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		var req clientapi.AllocRestartRequest
		if err := decodeOptionalBody(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
		if len(req.TaskName) > maxIDBytes {
			s.writeError(w, badRequest("TaskName: at most %d bytes", maxIDBytes))
			return
		}
		if err := c.RestartAlloc(s.lifecycleCtx(r), allocID, req.TaskName, req.AllTasks); err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, struct{}{})
	})
}

// allocSignal serves PUT /v1/client/allocation/<id>/signal
// ({"Task", "Signal"}): alloc-lifecycle.
func (s clientHandlers) allocSignal(w http.ResponseWriter, r *http.Request) {
	s.onAlloc(w, r, acl.NamespaceCapabilityAllocLifecycle, func(allocID string) {
		c, ok := s.client.(clientLifecycle)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		var req clientapi.AllocSignalRequest
		if err := decodeOptionalBody(r, &req); err != nil {
			s.writeError(w, err)
			return
		}
		if len(req.Task) > maxIDBytes {
			s.writeError(w, badRequest("Task: at most %d bytes", maxIDBytes))
			return
		}
		if err := c.SignalAlloc(s.lifecycleCtx(r), allocID, req.Task, req.Signal); err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, struct{}{})
	})
}

// lifecycleCtx is the context of a restart or signal: the agent's, not
// the caller's, so that a caller who leaves does not cut a task's stop
// half-way.
func (s clientHandlers) lifecycleCtx(*http.Request) context.Context {
	return s.stopping
}

// metaRead serves GET /v1/client/metadata[?node_id=]: node:read.
func (s clientHandlers) metaRead(w http.ResponseWriter, r *http.Request) {
	s.onNode(w, r, func() {
		c, ok := s.client.(clientMeta)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		writeJSON(w, r, http.StatusOK, c.NodeMeta())
	})
}

// metaApply serves POST /v1/client/metadata ({"NodeID", "Meta"}):
// node:write. The body's NodeID (else ?node_id=) names the node.
func (s clientHandlers) metaApply(w http.ResponseWriter, r *http.Request) {
	// The body is read here and kept for a forward to the node.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.writeError(w, structs.NewError(structs.ErrTooLarge, "Request body too large: exceeds limit http_max_body_bytes (%d bytes)", tooBig.Limit))
			return
		}
		s.writeError(w, badRequest("Failed to read request body: %v", err))
		return
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	// A null value is meaningful here (it unsets the key: `nomad node meta
	// apply -unset`), so the body is decoded without the null check every
	// other body has; the client bounds and checks keys and values.
	var req clientapi.NodeMetaApplyRequest
	if err := jsoninput.CheckLimits(body); err != nil {
		s.writeError(w, badRequest("Failed to decode request body: %v", err))
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(w, badRequest("Failed to decode request body: %v", err))
		return
	}
	if req.NodeID != "" && r.URL.Query().Get("node_id") == "" {
		// Route on the body's node: forwarding needs it in the query, as
		// the body is read already.
		q := r.URL.Query()
		q.Set("node_id", req.NodeID)
		r.URL.RawQuery = q.Encode()
	}
	s.onNode(w, r, func() {
		c, ok := s.client.(clientMeta)
		if !ok {
			s.writeError(w, errNoClientSupport)
			return
		}
		resp, err := c.ApplyNodeMeta(req.Meta)
		if err != nil {
			s.writeError(w, err)
			return
		}
		writeJSON(w, r, http.StatusOK, resp)
	})
}

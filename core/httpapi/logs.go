package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/acl"
	"github.com/drover-org/drover/core/httpapi/logstream"
	"github.com/drover-org/drover/core/structs"
)

// logHandlers serves /v1/client/fs/logs/{alloc}, locally or forwarded to the
// allocation's node. Its handlers reach the server through the embedded
// pointer.
type logHandlers struct{ *HTTPServer }

// headerForwarded marks a log request that an agent already forwarded to
// the alloc's node, so that two agents never bounce a request between them.
const headerForwarded = "X-Drover-Forwarded"

// logsRequest is a parsed GET /v1/client/fs/logs/:alloc.
type logsRequest struct {
	allocID, task, logType, origin string
	offset                         int64
	follow, plain                  bool
}

func parseLogsRequest(r *http.Request) (logsRequest, error) {
	q := r.URL.Query()
	req := logsRequest{
		allocID: r.PathValue("alloc"),
		task:    q.Get("task"),
		logType: q.Get("type"),
		origin:  q.Get("origin"),
	}
	if req.task == "" {
		return req, badRequest("task: must provide task name")
	}
	switch req.logType {
	case "stdout", "stderr":
	case "":
		return req, badRequest("type: must provide log type (stdout/stderr)")
	default:
		return req, badRequest("type: invalid log type %q; must be stdout or stderr", req.logType)
	}
	switch req.origin {
	case "":
		req.origin = "start"
	case "start", "end":
	default:
		return req, badRequest("origin: must be start or end, got %q", req.origin)
	}
	if v := q.Get("offset"); v != "" {
		off, err := strconv.ParseInt(v, 10, 64)
		if err != nil || off < 0 {
			return req, badRequest("offset: must be a non-negative integer, got %q", v)
		}
		req.offset = off
	}
	var err error
	if req.follow, err = parseBool(r, "follow"); err != nil {
		return req, err
	}
	if req.plain, err = parseBool(r, "plain"); err != nil {
		return req, err
	}
	return req, nil
}

func (s logHandlers) allocLogs(w http.ResponseWriter, r *http.Request) {
	req, err := parseLogsRequest(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if requestACL(r) != nil && !s.allowLogs(r, req.allocID) {
		s.writeError(w, errPermissionDenied)
		return
	}
	forwarded := r.Header.Get(headerForwarded) != ""
	if s.client == nil {
		if forwarded {
			s.writeError(w, structs.NewError(structs.ErrNotFound, "Unknown allocation %q", req.allocID))
			return
		}
		s.forwardLogs(w, r, req.allocID, nil)
		return
	}

	pos := int64(0)
	if req.origin == "start" {
		pos = req.offset
	}
	lw := logstream.NewWriter(w, req.plain, logstream.LogFile(req.task, req.logType), pos)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	var hb sync.WaitGroup
	if req.follow && !req.plain {
		hb.Add(1)
		go func() {
			defer hb.Done()
			lw.Heartbeat(ctx, s.heartbeatEvery())
		}()
	}
	err = s.client.AllocLogs(ctx, req.allocID, req.task, req.logType, req.origin, req.offset, req.follow, lw)
	// The caller left or the agent is shutting down: a followed stream's
	// normal end.
	ended := ctx.Err() != nil
	cancel()
	hb.Wait()

	switch {
	case err == nil || ended && (lw.Started() || s.stopping.Err() != nil):
		lw.Start() // an empty log is still a 200
	case lw.Started():
		// The status is gone already: end the stream and log why.
		s.logger.Warn("log stream ended with error", "alloc_id", req.allocID, "task", req.task, "error", err)
	case errors.Is(err, structs.ErrNotFound) && !forwarded:
		// Not on this node: the alloc may run on another client.
		s.forwardLogs(w, r, req.allocID, err)
	case ended:
		// The caller left before anything was sent.
	default:
		s.writeError(w, err)
	}
}

func (s logHandlers) heartbeatEvery() time.Duration {
	if s.logHeartbeat > 0 {
		return s.logHeartbeat
	}
	return logstream.DefaultHeartbeat
}

// forwardLogs proxies the request to the HTTP address of the node that runs
// the allocation (§11: /v1/client/fs/* must work when asked of a server).
// localErr is the local client's refusal, if any: when the state does not
// know the alloc either, it is the better explanation (an unknown task, say).
func (s logHandlers) forwardLogs(w http.ResponseWriter, r *http.Request, allocID string, localErr error) {
	var addr string
	var lookupErr error
	_, err := s.query(r.Context(), 0, func(ws memdb.WatchSet, st reader) (uint64, error) {
		a, err := st.AllocByID(ws, allocID)
		if err != nil {
			return 0, err
		}
		if a == nil {
			lookupErr = structs.NewError(structs.ErrNotFound, "Unknown allocation %q", allocID)
			return 1, nil
		}
		n, err := st.NodeByID(ws, a.NodeID)
		if err != nil {
			return 0, err
		}
		switch {
		case n == nil:
			lookupErr = structs.NewError(structs.ErrNotFound, "Unknown node %q of allocation %q", a.NodeID, allocID)
		case n.HTTPAddr == "":
			lookupErr = structs.NewError(structs.ErrUnavailable, "node %q of allocation %q advertises no HTTP address", a.NodeID, allocID)
		default:
			addr = n.HTTPAddr
		}
		return 1, nil
	})
	if err == nil {
		err = lookupErr
	}
	if err != nil {
		if localErr != nil && errors.Is(err, structs.ErrNotFound) {
			err = localErr
		}
		s.writeError(w, err)
		return
	}
	target := &url.URL{Scheme: "http", Host: addr}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(headerForwarded, "1")
		},
		FlushInterval: -1, // stream every frame as it comes
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.writeError(w, structs.NewError(structs.ErrUnavailable, "forwarding log request to node at %s: %v", addr, err))
		},
	}
	proxy.ServeHTTP(w, r)
}

// allocNamespacer is implemented by a ClientAPI that knows the namespace
// of the allocations it runs (a client-only agent has no state store).
type allocNamespacer interface {
	AllocNamespace(allocID string) (string, bool)
}

// allowLogs reports whether the caller may read the logs of allocID:
// read-logs in the allocation's namespace, found in the state store, or
// on a client-only agent from the client. An allocation found nowhere is
// refused.
func (s logHandlers) allowLogs(r *http.Request, allocID string) bool {
	if a := requestACL(r); a == nil || a.IsManagement() {
		return true
	}
	if s.srv != nil {
		if a, err := s.srv.State().AllocByID(nil, allocID); err == nil && a != nil {
			return allowNS(r, a.Namespace, acl.NamespaceCapabilityReadLogs)
		}
	}
	if c, ok := s.client.(allocNamespacer); ok {
		if ns, ok := c.AllocNamespace(allocID); ok {
			return allowNS(r, ns, acl.NamespaceCapabilityReadLogs)
		}
	}
	return false
}

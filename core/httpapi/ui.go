package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/core/ui"
)

// uiHandlers serves the web UI under /ui/. Its handlers reach the server
// through the embedded pointer.
type uiHandlers struct{ *HTTPServer }

// serveUI serves /ui/ with the UI that New built.
func (s uiHandlers) serveUI(w http.ResponseWriter, r *http.Request) { s.ui.ServeHTTP(w, r) }

// uiRootRedirect sends / and /ui to /ui/, keeping the query.
func (s uiHandlers) uiRootRedirect(w http.ResponseWriter, r *http.Request) {
	target := "/ui/"
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, target, http.StatusFound)
}

// uiHandler builds the web UI over this server's state store, token
// resolver, Raft configuration, writes and plugins.
func (s *HTTPServer) uiHandler() http.Handler {
	if s.srv == nil {
		// A client-only agent proxies /ui/ to a server with the rest.
		return http.NotFoundHandler()
	}
	cfg := ui.Config{
		State:      func() *state.StateStore { return s.srv.State() },
		Token:      requestToken,
		LeaderAddr: s.srv.LeaderAddr,
		Region:     s.srv.Region(),
		Actions:    uiActions{s},
		Logs:       uiLogs{s},
	}
	if s.resolver != nil {
		cfg.Resolver = s.resolver
	}
	if s.plugins != nil {
		cfg.AgentPlugins = s.plugins.List
	}
	if c, ok := s.srv.(Cluster); ok {
		cfg.Peers = func() ([]ui.Peer, error) {
			peers, _, err := c.ClusterRaftPeers()
			if err != nil {
				return nil, err
			}
			out := make([]ui.Peer, 0, len(peers))
			for _, p := range peers {
				out = append(out, ui.Peer{ID: p.ID, Node: p.Node, Address: p.Address, Leader: p.Leader, Voter: p.Voter})
			}
			return out, nil
		}
	}
	return ui.New(cfg)
}

// uiActions are the UI's writes: the same Server calls the API routes
// make. The UI has checked the caller's ACL, as the routes' rules do.
type uiActions struct{ s *HTTPServer }

func (a uiActions) ExchangeOneTimeToken(ctx context.Context, secret string) (*structs.ACLToken, error) {
	as := a.s.aclAPI
	if as == nil {
		return nil, structs.NewError(structs.ErrInvalid, "ACL support disabled")
	}
	tok, _, err := as.ExchangeOneTimeToken(ctx, secret)
	return tok, err
}

func (a uiActions) StopJob(ctx context.Context, ns, id string, purge bool) (*structs.JobDeregisterResponse, error) {
	return a.s.jobs.Deregister(ctx, ns, id, purge)
}

func (a uiActions) ForcePeriodic(ctx context.Context, ns, id string) (*structs.PeriodicForceResponse, error) {
	return a.s.jobs.ForcePeriodic(ctx, ns, id)
}

func (a uiActions) DispatchJob(ctx context.Context, ns string, req *structs.JobDispatchRequest) (*structs.JobDispatchResponse, error) {
	return a.s.jobs.Dispatch(ctx, ns, req)
}

func (a uiActions) PromoteDeployment(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	return a.s.deployments.Promote(ctx, id, true, nil)
}

func (a uiActions) FailDeployment(ctx context.Context, id string) (*structs.DeploymentUpdateResponse, error) {
	return a.s.deployments.Fail(ctx, id)
}

func (a uiActions) UpdateNodeDrain(ctx context.Context, nodeID string, spec *structs.DrainSpec, markEligible bool) (*structs.NodeEligibilityUpdateResponse, error) {
	return a.s.nodes.UpdateDrain(ctx, nodeID, spec, markEligible, nil)
}

func (a uiActions) UpdateNodeEligibility(ctx context.Context, nodeID, eligibility string) (*structs.NodeEligibilityUpdateResponse, error) {
	return a.s.nodes.UpdateEligibility(ctx, nodeID, eligibility)
}

// uiLogs reads task logs through this agent's own GET
// /v1/client/fs/logs route, so that the UI's reads are authorized (with
// the caller's token) and forwarded to the allocation's node exactly as
// the API's are.
type uiLogs struct{ s *HTTPServer }

// maxLogError bounds the body of a refused log read kept for its message.
const maxLogError = 4 << 10

func (l uiLogs) TaskLogs(ctx context.Context, secret, allocID, task, logType, origin string, offset int64, follow bool, w io.Writer) error {
	q := url.Values{"task": {task}, "type": {logType}, "origin": {origin}, "offset": {strconv.FormatInt(offset, 10)},
		"plain": {"true"}, "follow": {strconv.FormatBool(follow)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/v1/client/fs/logs/"+url.PathEscape(allocID)+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	if secret != "" {
		req.Header.Set("X-Nomad-Token", secret)
	}
	rw := &logResponse{w: w, header: http.Header{}}
	l.s.handler.ServeHTTP(rw, req)
	if rw.status == 0 || rw.status == http.StatusOK {
		return rw.err
	}
	msg := strings.TrimSpace(rw.errBody.String())
	if msg == "" {
		msg = http.StatusText(rw.status)
	}
	kind := structs.ErrInvalid
	switch rw.status {
	case http.StatusNotFound:
		kind = structs.ErrNotFound
	case http.StatusForbidden:
		kind = structs.ErrPermissionDenied
	}
	if rw.status >= 500 {
		return errors.New(msg)
	}
	return structs.NewError(kind, "%s", msg)
}

// logResponse is the ResponseWriter of an in-process log read: a 200's
// body goes to w as it comes (flushed by the caller's writer), any other
// status's body is kept as the error's message.
type logResponse struct {
	w       io.Writer
	header  http.Header
	status  int
	errBody bytes.Buffer
	err     error
}

func (r *logResponse) Header() http.Header { return r.header }

func (r *logResponse) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *logResponse) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.status != http.StatusOK {
		if room := maxLogError - r.errBody.Len(); room > 0 {
			r.errBody.Write(p[:min(len(p), room)])
		}
		return len(p), nil
	}
	n, err := r.w.Write(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

// Flush is a no-op: the caller's writer flushes its own answer.
func (r *logResponse) Flush() {}

package httpapi

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/drover-org/drover/core/structs"
)

// Reads in a cluster are consistent by default, as in Nomad: a follower
// hands a read to the leader unless the caller accepts a stale answer with
// ?stale. Nomad forwards the RPC behind the read; drover's reads run against
// the local state store inside the HTTP layer, so a follower forwards the
// HTTP request itself, query and headers included, which makes a blocking
// query a long poll on the leader's store.

// localPrefixes are the paths every agent answers about itself or passes to
// a node: never the leader's business.
var localPrefixes = []string{"/v1/agent/", "/v1/status/", "/v1/client/", "/v1/operator/join-token/",
	// Every server streams its own events (followers apply the same
	// log) and reports its own metrics.
	"/v1/event/", "/v1/metrics"}

// leaderRead reports whether r is a read that the leader serves.
func leaderRead(r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/v1/regions" {
		return false
	}
	for _, p := range localPrefixes {
		if strings.HasPrefix(r.URL.Path, p) {
			return false
		}
	}
	return true
}

// parseStale reads ?stale: present without a value, or true, allows a
// stale (local) answer.
func parseStale(r *http.Request) (bool, error) {
	vs, ok := r.URL.Query()["stale"]
	if !ok {
		return false, nil
	}
	if len(vs) == 0 || vs[0] == "" {
		return true, nil
	}
	b, err := strconv.ParseBool(vs[0])
	if err != nil {
		return false, badRequest("Expect `true` or `false` for `stale` query string parameter, got %s", vs[0])
	}
	return b, nil
}

// leaderReads sends consistent reads to the leader when this server is a
// follower in a cluster. A request that another agent already forwarded
// (it carries headerForwarded) is always served here: leadership may have
// moved during the hop, and an answer at most one election old is better
// than a forwarding loop or a refusal.
func (s *HTTPServer) leaderReads(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !leaderRead(r) {
			next.ServeHTTP(w, r)
			return
		}
		stale, err := parseStale(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		c, ok := s.srv.(Cluster)
		if !ok || stale || r.Header.Get(headerForwarded) != "" || c.IsLeader() {
			next.ServeHTTP(w, r)
			return
		}
		leader := c.LeaderHTTPAddr(r.Context())
		if leader == "" {
			s.writeError(w, structs.NewError(structs.ErrNoLeader, "No cluster leader"))
			return
		}
		s.proxyToLeader(w, r, leader)
	})
}

// proxyToLeader streams r to the leader's HTTP API and its answer back.
// The proxied request ends with the caller's, and with Shutdown, so that a
// forwarded long poll does not hold the agent's shutdown.
func (s *HTTPServer) proxyToLeader(w http.ResponseWriter, r *http.Request, leader string) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()

	target := &url.URL{Scheme: s.leaderScheme, Host: leader}
	proxy := &httputil.ReverseProxy{
		Transport: s.leaderTransport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Header.Set(headerForwarded, "1")
		},
		FlushInterval: -1, // streamed answers pass through as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			switch {
			case s.stopping.Err() != nil:
				s.writeError(w, structs.NewError(structs.ErrUnavailable, "agent is shutting down"))
			case r.Context().Err() != nil:
				// The caller went away; nobody reads an answer.
			default:
				s.writeError(w, structs.NewError(structs.ErrUnavailable, "forwarding request to leader at %s: %v", leader, err))
			}
		},
	}
	s.logger.Debug("forwarding read to leader", "path", r.URL.Path, "leader", leader)
	proxy.ServeHTTP(w, r.WithContext(ctx))
}

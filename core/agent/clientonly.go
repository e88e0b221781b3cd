package agent

import (
	"context"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/drover-org/drover/core/server"
)

// clientOnlyHandler is the HTTP API of an agent that runs only a client:
// client endpoints (logs) and the agent's own info are served here, and
// everything else is proxied to a server of the cluster, so the CLI works
// against any agent.
func clientOnlyHandler(local http.Handler, servers *remoteServers, scheme string, transport http.RoundTripper) http.Handler {
	proxy := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			target, _ := pr.In.Context().Value(targetKey{}).(*url.URL)
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1, // stream blocking queries and log follows as they come
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The agent's own plugins (list, status, reload) are this agent's.
		if strings.HasPrefix(r.URL.Path, "/v1/client/") || r.URL.Path == "/v1/agent/self" || r.URL.Path == "/v1/agent/health" ||
			strings.HasPrefix(r.URL.Path, "/v1/agent/plugin") {
			local.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		info, err := call[server.Empty, server.ServerInfo](ctx, servers, "Status.ServerInfo", &server.Empty{})
		cancel()
		if err != nil || info.HTTPAddr == "" {
			http.Error(w, "No path to a server: "+errString(err), http.StatusServiceUnavailable)
			return
		}
		target := &url.URL{Scheme: scheme, Host: info.HTTPAddr}
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, target)))
	})
}

type targetKey struct{}

func errString(err error) string {
	if err == nil {
		return "server has no HTTP address"
	}
	return err.Error()
}

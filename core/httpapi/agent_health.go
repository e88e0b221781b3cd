package httpapi

import "net/http"

// agentHealthPart is one part of GET /v1/agent/health: Nomad's lower-case
// keys.
type agentHealthPart struct {
	OK      bool   `json:"ok"`
	Message string `json:"message"`
}

// agentHealthResponse is the body of GET /v1/agent/health: a part for each
// role this agent runs (a part it does not run is left out).
type agentHealthResponse struct {
	Client *agentHealthPart `json:"client,omitempty"`
	Server *agentHealthPart `json:"server,omitempty"`
}

// registeredClient is implemented by a ClientAPI that knows whether its
// node has registered with a server.
type registeredClient interface {
	Registered() <-chan struct{}
}

// agentHealth serves GET /v1/agent/health, as Nomad's: 200 when every role
// this agent runs is healthy, else 500 with the same body saying which is
// not. A server is healthy while its cluster has a leader; a client once
// its node has registered with a server. No ACL: load balancers and
// service checks call it without a token.
func (s agentHandlers) agentHealth(w http.ResponseWriter, r *http.Request) {
	var body agentHealthResponse
	healthy := true
	if s.srv != nil {
		p := &agentHealthPart{OK: true, Message: "ok"}
		if s.srv.LeaderAddr() == "" {
			p.OK, p.Message = false, "server has no cluster leader"
		}
		body.Server = p
		healthy = healthy && p.OK
	}
	if s.client != nil {
		p := &agentHealthPart{OK: true, Message: "ok"}
		if rc, ok := s.client.(registeredClient); ok {
			select {
			case <-rc.Registered():
			default:
				p.OK, p.Message = false, "client has not registered with a server yet"
			}
		}
		body.Client = p
		healthy = healthy && p.OK
	}
	status := http.StatusOK
	if !healthy {
		status = http.StatusInternalServerError
	}
	writeJSON(w, r, status, &body)
}

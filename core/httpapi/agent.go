package httpapi

import (
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// statusHandlers serves /v1/status/* and /v1/regions. Its handlers reach the
// server through the embedded pointer.
type statusHandlers struct{ *HTTPServer }

// agentHandlers serves /v1/agent/*: this agent's own view, never forwarded
// to the leader. Its handlers reach the server through the embedded pointer.
type agentHandlers struct{ *HTTPServer }

// Agent and status endpoints: facts about this agent and the cluster that
// do not come from the state store.

// agentReloadPlugins swaps plugins of this agent for a fresh process of
// their (possibly new) binary without dropping work: with ?name= that one
// plugin, else every plugin whose binary or config changed, and the
// plugins added to or removed from the config and plugin_dir.
func (s agentHandlers) agentReloadPlugins(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("name") {
		s.agentReloadPlugin(w, r, r.URL.Query().Get("name"))
		return
	}
	if s.reload == nil {
		writeText(w, http.StatusNotImplemented, "this agent cannot reload plugins")
		return
	}
	done, err := s.reload(r.Context())
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, r, http.StatusOK, AgentPluginsReloadResponse{Reloaded: true, PluginsReload: done})
}

func (s statusHandlers) statusLeader(w http.ResponseWriter, r *http.Request) {
	leader := s.srv.LeaderAddr()
	if leader == "" {
		s.writeError(w, structs.ErrNoLeader)
		return
	}
	writeJSON(w, r, http.StatusOK, leader)
}

func (s statusHandlers) statusPeers(w http.ResponseWriter, r *http.Request) {
	peers, err := s.peerAddrs()
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, r, http.StatusOK, peers)
}

func (s statusHandlers) regions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, []string{s.region()})
}

func (s *HTTPServer) region() string {
	if r := s.srv.Region(); r != "" {
		return r
	}
	return structs.DefaultRegion
}

package httpapi

import (
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// Agent and status endpoints: facts about this agent and the cluster that
// do not come from the state store.

// agentReloadPlugins swaps plugins of this agent for a fresh process of
// their (possibly new) binary without dropping work: with ?name= that one
// plugin, else every plugin whose binary or config changed.
func (s *HTTPServer) agentReloadPlugins(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Has("name") {
		s.agentReloadPlugin(w, r, r.URL.Query().Get("name"))
		return
	}
	if s.reload == nil {
		writeText(w, http.StatusNotImplemented, "this agent cannot reload plugins")
		return
	}
	if err := s.reload(r.Context()); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, r, http.StatusOK, map[string]bool{"Reloaded": true})
}

func (s *HTTPServer) agentSelf(w http.ResponseWriter, r *http.Request) {
	if s.self != nil {
		writeJSON(w, r, http.StatusOK, s.self())
		return
	}
	writeJSON(w, r, http.StatusOK, map[string]any{
		"config": map[string]any{
			"Region":     s.region(),
			"Datacenter": s.srv.Datacenter(),
		},
		"member": map[string]any{
			"Tags": map[string]string{"region": s.region(), "dc": s.srv.Datacenter()},
		},
		"stats": map[string]any{},
	})
}

func (s *HTTPServer) statusLeader(w http.ResponseWriter, r *http.Request) {
	leader := s.srv.LeaderAddr()
	if leader == "" {
		s.writeError(w, structs.ErrNoLeader)
		return
	}
	writeJSON(w, r, http.StatusOK, leader)
}

func (s *HTTPServer) statusPeers(w http.ResponseWriter, r *http.Request) {
	peers, err := s.peerAddrs()
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, r, http.StatusOK, peers)
}

func (s *HTTPServer) regions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, http.StatusOK, []string{s.region()})
}

func (s *HTTPServer) region() string {
	if r := s.srv.Region(); r != "" {
		return r
	}
	return structs.DefaultRegion
}

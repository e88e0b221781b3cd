package httpapi

import (
	"context"
	"net/http"

	"github.com/drover-org/drover/core/structs"
)

// AgentPlugins is this agent's plugin host as the HTTP API serves it.
type AgentPlugins interface {
	// List describes every plugin, in config order.
	List() []structs.AgentPlugin
	// Get describes one plugin; an unknown name is an error of kind
	// structs.ErrNotFound that names it.
	Get(name string) (structs.AgentPlugin, error)
	// Reload relaunches one plugin, draining only its own calls; an
	// unknown name is an error of kind structs.ErrNotFound.
	Reload(ctx context.Context, name string) error
}

// AgentPluginsResponse is the body of GET /v1/agent/plugins.
type AgentPluginsResponse struct {
	Plugins []structs.AgentPlugin
}

// AgentPluginResponse is the body of a successful plugin reload.
type AgentPluginResponse struct {
	Reloaded bool
	Plugin   *structs.AgentPlugin `json:",omitempty"`
}

// PluginsReload is what a whole reload did, by plugin name.
type PluginsReload struct {
	Added      []string // started: a new stanza or plugin_dir file
	Removed    []string // gone from the config and plugin_dir: drained and stopped
	Relaunched []string // binary or stanza changed, or was down
}

// AgentPluginsReloadResponse is the body of a successful whole reload.
type AgentPluginsReloadResponse struct {
	Reloaded bool
	PluginsReload
}

// The agent's plugin endpoints are about this agent, never forwarded to
// the leader.

// agentPluginByQuery is GET /v1/agent/plugin?name=<name>.
func (s agentHandlers) agentPluginByQuery(w http.ResponseWriter, r *http.Request) {
	s.agentPlugin(w, r, r.URL.Query().Get("name"))
}

// agentPluginByName is GET /v1/agent/plugins/{name}.
func (s agentHandlers) agentPluginByName(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "reload" { // the reload endpoint, asked with GET
		w.Header().Set("Allow", "PUT, POST")
		writeText(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	s.agentPlugin(w, r, name)
}

func (s agentHandlers) agentPlugins(w http.ResponseWriter, r *http.Request) {
	if s.plugins == nil {
		writeText(w, http.StatusNotImplemented, "this agent does not report its plugins")
		return
	}
	list := s.plugins.List()
	if list == nil {
		list = []structs.AgentPlugin{}
	}
	writeJSON(w, r, http.StatusOK, AgentPluginsResponse{Plugins: list})
}

func (s agentHandlers) agentPlugin(w http.ResponseWriter, r *http.Request, name string) {
	if s.plugins == nil {
		writeText(w, http.StatusNotImplemented, "this agent does not report its plugins")
		return
	}
	if name == "" {
		writeText(w, http.StatusBadRequest, "name: the plugin's name is required")
		return
	}
	p, err := s.plugins.Get(name)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, r, http.StatusOK, p)
}

func (s agentHandlers) agentReloadPlugin(w http.ResponseWriter, r *http.Request, name string) {
	if s.plugins == nil {
		writeText(w, http.StatusNotImplemented, "this agent cannot reload plugins")
		return
	}
	if name == "" {
		writeText(w, http.StatusBadRequest, "name: the plugin's name is required (omit name to reload every changed plugin)")
		return
	}
	if err := s.plugins.Reload(r.Context(), name); err != nil {
		s.writeError(w, err)
		return
	}
	resp := AgentPluginResponse{Reloaded: true}
	if p, err := s.plugins.Get(name); err == nil {
		resp.Plugin = &p
	}
	writeJSON(w, r, http.StatusOK, resp)
}

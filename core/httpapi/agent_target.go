package httpapi

import (
	"context"
	"fmt"
	"net/http"
)

// refuseOtherAgent answers a monitor or profile request whose node_id or
// server_id names another agent, and reports whether it did: a server_id
// no server of the cluster has is Nomad's 500 "unknown Nomad server <id>";
// a known other agent is a 501 (Nomad forwards; drover serves the agent
// asked only). what says what this agent would have done.
func (s agentHandlers) refuseOtherAgent(w http.ResponseWriter, r *http.Request, what string) bool {
	q := r.URL.Query()
	for _, k := range []string{"node_id", "server_id"} {
		v := q.Get(k)
		if v == "" || s.isThisAgent(r.Context(), k, v) {
			continue
		}
		if k == "server_id" && !s.knownServer(r.Context(), v) {
			writeText(w, http.StatusInternalServerError, fmt.Sprintf("unknown Nomad server %s", v))
			return true
		}
		writeText(w, http.StatusNotImplemented, fmt.Sprintf("%s: drover %s; ask %q's agent directly", k, what, v))
		return true
	}
	return false
}

// knownServer reports whether a server of the cluster is named id (its
// name, or Nomad's "<name>.<region>"). Without a cluster view, or when the
// members cannot be listed, every name counts as known.
func (s agentHandlers) knownServer(ctx context.Context, id string) bool {
	c, ok := s.srv.(Cluster)
	if !ok {
		return true
	}
	members, err := c.ClusterMembers(ctx)
	if err != nil {
		return true
	}
	for _, m := range members {
		if id == m.Name || id == m.Name+"."+m.Region {
			return true
		}
	}
	return false
}

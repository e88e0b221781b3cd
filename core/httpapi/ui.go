package httpapi

import (
	"net/http"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/ui"
)

// The web UI authorizes each page itself, with this server's resolver and
// the same header parsing as the API (plus its cookie).
func init() { routeRules["/ui/"] = self }

// uiHandler builds the web UI over this server's state store, token
// resolver and Raft configuration.
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
	}
	if s.resolver != nil {
		cfg.Resolver = s.resolver
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

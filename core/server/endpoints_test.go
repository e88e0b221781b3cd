package server

import "github.com/drover-org/drover/core/httpapi"

// httpConfig is an HTTP API over s, its areas wired to s's endpoints as the
// agent wires them.
func httpConfig(s *Server) httpapi.Config {
	return httpapi.Config{
		Server: s, Jobs: s.Jobs(), Nodes: s.Nodes(), Deployments: s.Deployments(),
		Operator: s.Operator(), System: s, Namespaces: s.Namespaces(), NodePools: s.NodePools(),
		Services: s.Services(), CSI: s.CSI(), JobTypes: s,
		ACL: s.ACL(), ACLCRUD: s.ACL(), JoinTokens: s.PKI(), Resolver: s.ACL(),
	}
}

package agent

import (
	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/server"
)

// serveServer points the HTTP API at this agent's server: reads and
// cluster facts at the server (through clusterServer), each area's writes
// at the server's endpoint for it, and token resolution at its ACL
// endpoint.
func serveServer(cfg *httpapi.Config, srv *server.Server) {
	cfg.Server = &clusterServer{Server: srv}
	cfg.Jobs, cfg.Nodes, cfg.Deployments = srv.Jobs(), srv.Nodes(), srv.Deployments()
	cfg.Operator, cfg.System = srv.Operator(), srv
	cfg.Namespaces, cfg.NodePools, cfg.Services = srv.Namespaces(), srv.NodePools(), srv.Services()
	cfg.CSI, cfg.JobTypes = srv.CSI(), srv
	cfg.ACL, cfg.ACLCRUD, cfg.JoinTokens = srv.ACL(), srv.ACL(), srv.PKI()
	cfg.Variables = srv.Variables()
	if cfg.Resolver == nil {
		cfg.Resolver = srv.ACL()
	}
}

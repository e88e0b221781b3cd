package httpapi

import (
	"github.com/drover-org/drover/core/server"
)

// serverConfig is cfg over a real server, its areas wired to the server's
// endpoints as the agent wires them.
func serverConfig(srv *server.Server, cfg Config) Config {
	cfg.Server = srv
	cfg.Jobs, cfg.Nodes, cfg.Deployments = srv.Jobs(), srv.Nodes(), srv.Deployments()
	cfg.Operator, cfg.System = srv.Operator(), srv
	cfg.Namespaces, cfg.NodePools, cfg.Services = srv.Namespaces(), srv.NodePools(), srv.Services()
	cfg.CSI, cfg.JobTypes = srv.CSI(), srv
	cfg.ACL, cfg.ACLCRUD, cfg.JoinTokens = srv.ACL(), srv.ACL(), srv.PKI()
	cfg.Variables = srv.Variables()
	if cfg.Resolver == nil {
		cfg.Resolver = srv.ACL()
	}
	return cfg
}

// sameServer is cfg over the server and areas h serves.
func sameServer(h *HTTPServer, cfg Config) Config {
	cfg.Server = h.srv
	cfg.Jobs, cfg.Nodes, cfg.Deployments = h.jobs, h.nodes, h.deployments
	cfg.Operator, cfg.System = h.operator, h.system
	cfg.Namespaces, cfg.NodePools, cfg.Services = h.namespaces, h.nodePools, h.services
	cfg.CSI, cfg.JobTypes = h.csi, h.jobTypes
	cfg.ACL, cfg.ACLCRUD, cfg.JoinTokens = h.aclAPI, h.aclCRUDs, h.joinToks
	cfg.Variables = h.variables
	if cfg.Resolver == nil {
		cfg.Resolver = h.resolver
	}
	return cfg
}

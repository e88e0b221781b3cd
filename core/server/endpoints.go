package server

import (
	"github.com/drover-org/drover/core/server/aclendpoint"
	"github.com/drover-org/drover/core/server/pkiendpoint"
)

// The server's RPC and API endpoints, grouped by area as Nomad's are: each
// area's calls are methods of a small value over the server (Jobs().Register,
// Nodes().UpdateDrain, ...), so the Server itself keeps only its lifecycle,
// Raft and leadership. The RPC handlers (rpc.go and each area's register)
// and the HTTP API (wired by the agent) call these values.

// Jobs is the Job, Periodic and plan endpoint: job_endpoint.go,
// job_scale.go, job_limits.go, plan_endpoint.go.
type Jobs struct{ srv *Server }

// Nodes is the Node endpoint and allocation updates: node_endpoint.go,
// alloc_running.go.
type Nodes struct{ srv *Server }

// Deployments is the Deployment endpoint: deployment_endpoint.go.
type Deployments struct{ srv *Server }

// NodePools is the NodePool endpoint: node_pool_endpoint.go.
type NodePools struct{ srv *Server }

// Namespaces is the Namespace endpoint: namespace_endpoint.go,
// namespace_rpc.go.
type Namespaces struct{ srv *Server }

// Operator is the Operator and Status endpoint: the scheduler
// configuration (operator_endpoint.go), the Raft peers and the members
// (cluster.go).
type Operator struct{ srv *Server }

// Services is the service registration endpoint: services.go.
type Services struct{ srv *Server }

// CSI is the CSI volume and controller endpoint: csi.go, in front of
// package csivolumes.
type CSI struct{ srv *Server }

// Jobs returns the Job endpoint.
func (s *Server) Jobs() Jobs { return Jobs{s} }

// Nodes returns the Node endpoint.
func (s *Server) Nodes() Nodes { return Nodes{s} }

// Deployments returns the Deployment endpoint.
func (s *Server) Deployments() Deployments { return Deployments{s} }

// NodePools returns the NodePool endpoint.
func (s *Server) NodePools() NodePools { return NodePools{s} }

// Namespaces returns the Namespace endpoint.
func (s *Server) Namespaces() Namespaces { return Namespaces{s} }

// Operator returns the Operator endpoint.
func (s *Server) Operator() Operator { return Operator{s} }

// Services returns the service registration endpoint.
func (s *Server) Services() Services { return Services{s} }

// CSI returns the CSI volume endpoint.
func (s *Server) CSI() CSI { return CSI{s} }

// ACL returns the ACL endpoint (aclendpoint): token resolution and the
// ACL writes.
func (s *Server) ACL() *aclendpoint.ACL { return s.acl }

// PKI returns the PKI endpoint (pkiendpoint): join tokens and
// certificates.
func (s *Server) PKI() *pkiendpoint.PKI { return s.pki }

package server

import (
	"github.com/drover-org/drover/core/server/pkiendpoint"
	"github.com/drover-org/drover/core/structs"
)

// rpcAccess is who may call each RPC method, by the caller's certificate
// (see pkiendpoint.Access). Methods missing from it are server-only: a
// method added without a thought for its callers is safe.
var rpcAccess = map[string]pkiendpoint.Access{
	"PKI.JoinChallenge": {Public: true},
	"PKI.Join":          {Public: true},
	"PKI.Renew":         {},
	// A client-only agent finds its servers' HTTP addresses with it (to
	// proxy the HTTP API); it tells nothing beyond the members list.
	"Status.ServerInfo": {},
	// A client agent authorizes its own HTTP API (logs, agent info) by
	// the caller's token; the reply holds no secret.
	"ACL.ResolveToken": {},
	"Node.Register": pkiendpoint.ForNode("register", func(r any) string {
		if a, ok := r.(*NodeRegisterArgs); ok && a.Node != nil {
			return a.Node.ID
		}
		return ""
	}),
	"Node.Heartbeat":  pkiendpoint.ForNode("heartbeat", func(r any) string { return r.(*NodeAuthArgs).NodeID }),
	"Node.GetAllocs":  pkiendpoint.ForNode("read the allocations", func(r any) string { return r.(*NodeAllocsArgs).NodeID }),
	"CSIVolume.Claim": pkiendpoint.ForNode("claim volumes", func(r any) string { return r.(*structs.CSIVolumeClaimArgs).NodeID }),
	"CSIVolume.Unpublish": pkiendpoint.ForNode("release volume claims", func(r any) string {
		return r.(*structs.CSIVolumeUnpublishArgs).NodeID
	}),
	"CSIController.Poll": pkiendpoint.ForNode("take CSI controller calls", func(r any) string { return r.(*structs.CSIControllerPollArgs).NodeID }),
	"CSIController.Done": pkiendpoint.ForNode("report CSI controller calls", func(r any) string { return r.(*structs.CSIControllerDoneArgs).NodeID }),
	"Node.UpdateAllocs": pkiendpoint.ForNode("update the allocations", func(r any) string {
		return r.(*NodeUpdateAllocsArgs).NodeID
	}),
	"ServiceRegistration.NodeUpdate": pkiendpoint.ForNode("register services", func(r any) string {
		return r.(*structs.ServiceRegistrationNodeArgs).NodeID
	}),
	"ServiceRegistration.Lookup": pkiendpoint.ForNode("read services", func(r any) string {
		return r.(*structs.ServiceLookupArgs).NodeID
	}),
	// Templates' variables: what the node's own allocations' tasks may read.
	"Variables.TaskRead": pkiendpoint.ForNode("read variables", func(r any) string {
		return r.(*structs.VariableTaskReadArgs).NodeID
	}),
}

// PublicMethods are the methods a caller without a certificate may reach:
// the join exchange. The agent serves them, and nothing else, to such
// callers (rpc.Server.ServePublic), with tight limits.
func PublicMethods() []string { return pkiendpoint.PublicMethods(rpcAccess) }

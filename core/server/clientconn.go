package server

import (
	"context"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// ClientConn is an in-process client's connection to this server (a dev
// agent's client, or a test's): core/client's ServerConn, each call
// going straight to the endpoint that the RPC of the same name reaches.
type ClientConn struct{ srv *Server }

// NewClientConn returns the connection of an in-process client to s.
func NewClientConn(s *Server) ClientConn { return ClientConn{s} }

// RegisterNode is Nodes().Register.
func (c ClientConn) RegisterNode(ctx context.Context, node *structs.Node) (time.Duration, error) {
	return c.srv.Nodes().Register(ctx, node)
}

// Heartbeat is Nodes().Heartbeat.
func (c ClientConn) Heartbeat(ctx context.Context, nodeID, secretID string) (time.Duration, error) {
	return c.srv.Nodes().Heartbeat(ctx, nodeID, secretID)
}

// Allocs is Nodes().Allocs.
func (c ClientConn) Allocs(ctx context.Context, nodeID, secretID string, minIndex uint64, maxWait time.Duration) ([]*structs.Allocation, uint64, error) {
	return c.srv.Nodes().Allocs(ctx, nodeID, secretID, minIndex, maxWait)
}

// UpdateAllocs is Nodes().UpdateAllocs.
func (c ClientConn) UpdateAllocs(ctx context.Context, nodeID, secretID string, allocs []*structs.Allocation) error {
	return c.srv.Nodes().UpdateAllocs(ctx, nodeID, secretID, allocs)
}

// ClaimVolume is CSI().ClaimVolume.
func (c ClientConn) ClaimVolume(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	return c.srv.CSI().ClaimVolume(ctx, args)
}

// UnpublishVolume is CSI().UnpublishVolume.
func (c ClientConn) UnpublishVolume(ctx context.Context, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error) {
	return c.srv.CSI().UnpublishVolume(ctx, args)
}

// ControllerOps is CSI().ControllerOps.
func (c ClientConn) ControllerOps(ctx context.Context, args *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error) {
	return c.srv.CSI().ControllerOps(ctx, args)
}

// ControllerDone is CSI().ControllerDone.
func (c ClientConn) ControllerDone(ctx context.Context, args *structs.CSIControllerDoneArgs) error {
	return c.srv.CSI().ControllerDone(ctx, args)
}

// UpdateServices is Services().Update.
func (c ClientConn) UpdateServices(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error {
	return c.srv.Services().Update(ctx, args)
}

// LookupServices is Services().Lookup.
func (c ClientConn) LookupServices(ctx context.Context, args *structs.ServiceLookupArgs) (*structs.ServiceLookupReply, error) {
	return c.srv.Services().Lookup(ctx, args)
}

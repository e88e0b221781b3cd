package server

import (
	"context"

	"github.com/drover-org/drover/core/structs"
)

// ClaimVolume claims a volume for a client's allocation.
func (s *Server) ClaimVolume(ctx context.Context, args *structs.CSIVolumeClaimArgs) (*structs.CSIVolumeClaimReply, error) {
	return nil, structs.NewError(structs.ErrUnavailable, "claiming CSI volumes is not served yet")
}

// UnpublishVolume releases a client's claim.
func (s *Server) UnpublishVolume(ctx context.Context, args *structs.CSIVolumeUnpublishArgs) (*structs.CSIVolumeUnpublishReply, error) {
	return nil, structs.NewError(structs.ErrUnavailable, "releasing CSI volumes is not served yet")
}

// ControllerOps hands a controller client its operations.
func (s *Server) ControllerOps(ctx context.Context, args *structs.CSIControllerPollArgs) (*structs.CSIControllerPollReply, error) {
	<-ctx.Done()
	return &structs.CSIControllerPollReply{}, nil
}

// ControllerDone takes a controller client's results.
func (s *Server) ControllerDone(ctx context.Context, args *structs.CSIControllerDoneArgs) error {
	return nil
}

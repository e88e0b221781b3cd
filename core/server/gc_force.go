package server

import (
	"context"

	"github.com/drover-org/drover/core/structs"
)

// ForceGC runs every core GC job at once with the force threshold
// (sdk/gc.ForceThreshold), node GC last: `drover system gc`, PUT
// /v1/system/gc. A follower forwards it to the leader
// (System.GarbageCollect); errors keep their kind across the forward.
func (s *Server) ForceGC(ctx context.Context) error {
	return structs.NewError(structs.ErrUnavailable, "garbage collection is not implemented yet")
}

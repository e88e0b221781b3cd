package server

import (
	"testing"

	"github.com/drover-org/drover/core/httpapi"
	"github.com/drover-org/drover/core/structs"
)

// The HTTP API parses job files with the server's declarations.
var _ httpapi.JobTypes = (*Server)(nil)

func TestJobTypeBehavior(t *testing.T) {
	s := &Server{cfg: Config{Schedulers: typeRouter{"gpu-batch": nil}}}
	b, ok := s.JobTypeBehavior("gpu-batch")
	if !ok || b == nil || !b.PerNode || b.MaxAttempts != 1 {
		t.Fatalf("JobTypeBehavior(gpu-batch) = %+v, %v; want the router's declaration", b, ok)
	}
	b.RefusedBlocks = append(b.RefusedBlocks, structs.BlockUpdate)
	if again, _ := s.JobTypeBehavior("gpu-batch"); again.Refuses(structs.BlockUpdate) {
		t.Error("a caller's change reached the router's declaration")
	}
	if b, ok := s.JobTypeBehavior("unknown"); ok || b != nil {
		t.Errorf("JobTypeBehavior(unknown) = %+v, %v; want nil, false", b, ok)
	}
}

package gc

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/proto/gcpb"
)

type countingCollector struct{ calls int }

func (c *countingCollector) Info(context.Context) (*gcpb.InfoResponse, error) {
	return &gcpb.InfoResponse{}, nil
}

func (c *countingCollector) Decide(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	c.calls++
	return &gcpb.DecideResponse{}, nil
}

// The plugin-side adapter refuses a page outside the protocol on its own,
// whoever sent it, before the implementation sees it.
func TestServerRefusesBadPage(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  *gcpb.DecideRequest
	}{
		{"no collection", &gcpb.DecideRequest{NowUnixNano: 1}},
		{"candidates of another collection", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_EVAL, NowUnixNano: 1,
			Nodes: []*gcpb.Node{{Id: "n"}}}},
		{"negative threshold", &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE, NowUnixNano: 1,
			Thresholds: &gcpb.Thresholds{NodeNs: -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			impl := &countingCollector{}
			_, err := (&grpcServer{impl: impl}).Decide(t.Context(), tc.req)
			if status.Code(err) != codes.InvalidArgument || impl.calls != 0 {
				t.Fatalf("err %v, implementation called %d times", err, impl.calls)
			}
		})
	}
}

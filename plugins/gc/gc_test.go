package gc

import (
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/gc/gctest"
	"github.com/drover-org/drover/sdk/gc/golden"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestInfo(t *testing.T) {
	got, err := New().Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got.GetName() != "gc" || got.GetVersion() == "" {
		t.Errorf("Info = %v", got)
	}
	// Every collection but the unspecified one.
	if len(got.GetCollections()) != len(gcpb.Collection_name)-1 {
		t.Errorf("Info lists %d collections, want %d", len(got.GetCollections()), len(gcpb.Collection_name)-1)
	}
}

// TestGolden runs the scenarios in testdata (pages in, decisions out); see
// package sdk/gc/golden for their format and -update.
func TestGolden(t *testing.T) {
	c := New()
	golden.Run(t, "testdata", func(req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
		return c.Decide(t.Context(), req)
	})
}

// TestGoldenOverGRPC decides every scenario again through the plugin's
// gRPC adapters: the same decisions come back, checked on both sides.
func TestGoldenOverGRPC(t *testing.T) {
	remote := gctest.Connect(t, New())
	golden.Run(t, "testdata", func(req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
		want, err := Decide(req)
		if err != nil {
			return nil, err
		}
		got, err := remote.Decide(t.Context(), req)
		if err != nil {
			return nil, err
		}
		if !proto.Equal(got, want) {
			t.Errorf("over gRPC: %v, in process: %v", got, want)
		}
		return got, nil
	})
}

func TestDecideRefusesBadPage(t *testing.T) {
	if _, err := Decide(&gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE}); err == nil {
		t.Fatal("Decide without a clock: want an error")
	}
}

var _ sdkgc.Collector = New()

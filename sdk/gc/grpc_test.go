package gc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/gc/gctest"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// funcCollector adapts two functions to gc.Collector.
type funcCollector struct {
	info   func(context.Context) (*gcpb.InfoResponse, error)
	decide func(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error)
}

func (f funcCollector) Info(ctx context.Context) (*gcpb.InfoResponse, error) { return f.info(ctx) }
func (f funcCollector) Decide(ctx context.Context, r *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	return f.decide(ctx, r)
}

var now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func nodePage(n int) *gcpb.DecideRequest {
	req := &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE, NowUnixNano: now, Thresholds: gc.DefaultThresholds()}
	for i := range n {
		req.Nodes = append(req.Nodes, &gcpb.Node{Id: strings.Repeat("n", 8) + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Status: gc.NodeDown, ModifyIndex: uint64(i + 1)})
	}
	return req
}

// reapAll reaps every node of a node page.
func reapAll(_ context.Context, r *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
	resp := &gcpb.DecideResponse{}
	for _, n := range r.GetNodes() {
		resp.Decisions = append(resp.Decisions, &gcpb.Decision{Kind: gcpb.ObjectKind_OBJECT_KIND_NODE, Id: n.GetId(),
			Action: gcpb.Action_ACTION_REAP, Reason: "down", ModifyIndex: n.GetModifyIndex()})
	}
	return resp, nil
}

func TestRoundTrip(t *testing.T) {
	info := &gcpb.InfoResponse{Name: "echo", Version: "1.2.3", Collections: []gcpb.Collection{gcpb.Collection_COLLECTION_NODE}}
	c := gctest.Connect(t, funcCollector{
		info:   func(context.Context) (*gcpb.InfoResponse, error) { return info, nil },
		decide: reapAll,
	})
	got, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, info) {
		t.Errorf("Info = %v, want %v", got, info)
	}
	req := nodePage(gc.MaxCandidates)
	resp, err := c.Decide(t.Context(), req)
	if err != nil {
		t.Fatalf("Decide of a full page: %v", err)
	}
	if len(resp.GetDecisions()) != gc.MaxCandidates || resp.GetDecisions()[7].GetId() != req.GetNodes()[7].GetId() {
		t.Errorf("Decide = %d decisions", len(resp.GetDecisions()))
	}
}

func TestAdaptersRefuse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     *gcpb.DecideRequest
		decide  func(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error)
		want    codes.Code
		wantMsg string
	}{
		{
			name: "a page over the bound is refused before it is sent",
			req:  nodePage(gc.MaxCandidates + 1), decide: reapAll,
			want: codes.InvalidArgument, wantMsg: "over the limit",
		},
		{
			name: "a request without a clock is refused",
			req:  &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE}, decide: reapAll,
			want: codes.InvalidArgument, wantMsg: "now_unix_nano",
		},
		{
			name: "a decision about an object outside the page is refused",
			req:  nodePage(1),
			decide: func(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
				return &gcpb.DecideResponse{Decisions: []*gcpb.Decision{{Kind: gcpb.ObjectKind_OBJECT_KIND_NODE, Id: "other", Action: gcpb.Action_ACTION_REAP}}}, nil
			},
			want: codes.Internal, wantMsg: "not in the page",
		},
		{
			name: "a reap below the safety floor is refused",
			req: &gcpb.DecideRequest{Collection: gcpb.Collection_COLLECTION_NODE, NowUnixNano: now,
				Nodes: []*gcpb.Node{{Id: "n1", Status: gc.NodeReady}}},
			decide: reapAll,
			want:   codes.Internal, wantMsg: `status "ready" is not down`,
		},
		{
			name: "a plugin's status error keeps its code",
			req:  nodePage(1),
			decide: func(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
				return nil, status.Error(codes.FailedPrecondition, "not now")
			},
			want: codes.FailedPrecondition, wantMsg: "not now",
		},
		{
			name: "a plain error becomes Unknown",
			req:  nodePage(1),
			decide: func(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
				return nil, errors.New("boom")
			},
			want: codes.Unknown, wantMsg: "boom",
		},
		{
			name: "a nil response is a named contract breach",
			req:  nodePage(1),
			decide: func(context.Context, *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
				return nil, nil
			},
			want: codes.Internal, wantMsg: "nil DecideResponse",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := gctest.Connect(t, funcCollector{decide: tc.decide})
			_, err := c.Decide(t.Context(), tc.req)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %v (err %v), want %v", got, err, tc.want)
			}
			if !strings.Contains(status.Convert(err).Message(), tc.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", status.Convert(err).Message(), tc.wantMsg)
			}
		})
	}
}

func TestCancellationReachesPlugin(t *testing.T) {
	started, sawCancel := make(chan struct{}), make(chan struct{})
	c := gctest.Connect(t, funcCollector{decide: func(ctx context.Context, _ *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
		close(started)
		<-ctx.Done()
		close(sawCancel)
		return nil, status.FromContextError(ctx.Err()).Err()
	}})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Decide(ctx, nodePage(1))
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("Decide error = %v, want Canceled", err)
	}
	select {
	case <-sawCancel:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin's handler never saw the cancellation")
	}
}

func TestGRPCServerNeedsImpl(t *testing.T) {
	if err := (&gc.Plugin{}).GRPCServer(nil, nil); err == nil {
		t.Fatal("GRPCServer with a nil Impl: want an error")
	}
}

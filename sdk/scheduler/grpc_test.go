package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// funcScheduler adapts two functions to scheduler.Scheduler.
type funcScheduler struct {
	info     func(context.Context) (*schedulerpb.InfoResponse, error)
	schedule func(context.Context, *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error)
}

func (f funcScheduler) Info(ctx context.Context) (*schedulerpb.InfoResponse, error) {
	return f.info(ctx)
}

func (f funcScheduler) Schedule(ctx context.Context, r *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	return f.schedule(ctx, r)
}

func TestAdaptersRoundTrip(t *testing.T) {
	impl := funcScheduler{
		info: func(context.Context) (*schedulerpb.InfoResponse, error) {
			return &schedulerpb.InfoResponse{Name: "echo", Version: "1.2.3",
				JobTypes: []*schedulerpb.JobTypeInfo{{Name: "echo", MaxAttempts: 5}}}, nil
		},
		schedule: func(_ context.Context, r *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
			return &schedulerpb.ScheduleResponse{
				StatusDescription: r.GetEval().GetId(),
				QueuedAllocations: map[string]int32{"nodes": int32(len(r.GetNodes()))},
			}, nil
		},
	}
	s := conformance.Connect(t, impl)

	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.GetName() != "echo" || info.GetJobTypes()[0].GetMaxAttempts() != 5 {
		t.Errorf("Info = %v", info)
	}

	// A request well past gRPC's 4 MiB default must pass both ways.
	req := conformance.NewBuilder("echo").Nodes(3).Request()
	big := strings.Repeat("x", 1024)
	for i := range 6 * 1024 {
		req.Nodes = append(req.Nodes, &schedulerpb.Node{Id: big, Name: string(rune('a' + i%26))})
	}
	resp, err := s.Schedule(t.Context(), req)
	if err != nil {
		t.Fatalf("Schedule of a %d-node request: %v", len(req.Nodes), err)
	}
	if resp.GetStatusDescription() != req.GetEval().GetId() || resp.GetQueuedAllocations()["nodes"] != int32(len(req.Nodes)) {
		t.Errorf("Schedule = %v", resp)
	}
}

func TestAdaptersErrorsAndContext(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule func(context.Context, *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error)
		ctx      func(t *testing.T) context.Context
		want     codes.Code
		wantMsg  string
	}{
		{
			name: "status error keeps its code",
			schedule: func(context.Context, *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
				return nil, status.Error(codes.InvalidArgument, "no eval")
			},
			want: codes.InvalidArgument, wantMsg: "no eval",
		},
		{
			name: "plain error becomes Unknown with its text",
			schedule: func(context.Context, *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
				return nil, errors.New("boom")
			},
			want: codes.Unknown, wantMsg: "boom",
		},
		{
			name: "nil response is a named contract breach",
			schedule: func(context.Context, *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
				return nil, nil
			},
			want: codes.Internal, wantMsg: "nil ScheduleResponse",
		},
		{
			name: "deadline reaches the plugin",
			schedule: func(ctx context.Context, _ *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
				if _, ok := ctx.Deadline(); !ok {
					return nil, status.Error(codes.FailedPrecondition, "no deadline")
				}
				return &schedulerpb.ScheduleResponse{}, nil
			},
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				t.Cleanup(cancel)
				return ctx
			},
			want: codes.OK,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := conformance.Connect(t, funcScheduler{schedule: tc.schedule})
			ctx := t.Context()
			if tc.ctx != nil {
				ctx = tc.ctx(t)
			}
			_, err := s.Schedule(ctx, conformance.NewBuilder("x").Nodes(3).Request())
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code = %v (err %v), want %v", got, err, tc.want)
			}
			if !strings.Contains(status.Convert(err).Message(), tc.wantMsg) {
				t.Errorf("message = %q, want it to contain %q", status.Convert(err).Message(), tc.wantMsg)
			}
		})
	}
}

// The caller's cancellation must reach the plugin's handler, so an abandoned
// eval stops burning the plugin's CPU.
func TestCancellationReachesPlugin(t *testing.T) {
	started, sawCancel := make(chan struct{}), make(chan struct{})
	s := conformance.Connect(t, funcScheduler{
		schedule: func(ctx context.Context, _ *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
			close(started)
			<-ctx.Done()
			close(sawCancel)
			return nil, status.FromContextError(ctx.Err()).Err()
		},
	})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Schedule(ctx, conformance.NewBuilder("x").Nodes(3).Request())
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("Schedule error = %v, want Canceled", err)
	}
	select {
	case <-sawCancel:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin's handler never saw the cancellation")
	}
}

func TestGRPCServerNeedsImpl(t *testing.T) {
	if err := (&scheduler.Plugin{}).GRPCServer(nil, nil); err == nil {
		t.Fatal("GRPCServer with a nil Impl: want an error")
	}
}

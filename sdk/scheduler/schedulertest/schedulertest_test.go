package schedulertest

import (
	"context"
	"testing"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type echo struct{}

func (echo) Info(context.Context) (*schedulerpb.InfoResponse, error) {
	return &schedulerpb.InfoResponse{Name: "echo", JobTypes: []*schedulerpb.JobTypeInfo{{Name: "x", MaxAttempts: 1}}}, nil
}

func (echo) Schedule(_ context.Context, r *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
	return &schedulerpb.ScheduleResponse{StatusDescription: r.GetEval().GetId()}, nil
}

// The alias still connects over gRPC and its Request is still valid.
func TestConnectAlias(t *testing.T) {
	req := Request("x")
	resp, err := Connect(t, echo{}).Schedule(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatusDescription() != req.GetEval().GetId() || len(req.GetNodes()) != 3 {
		t.Errorf("Schedule = %v for %d nodes", resp, len(req.GetNodes()))
	}
}

// Package schedulertest helps scheduler plugin authors test their plugin the
// way the drover core will call it: through gRPC, with the production message
// size limits, but in one process and in milliseconds.
package schedulertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/shared"
)

// Connect serves impl over an in-memory gRPC connection and returns the
// host-side Scheduler stub, so every request and response is really
// marshalled, sent and unmarshalled. Everything is torn down when t ends.
//
// It uses the same adapters as a real plugin (scheduler.Plugin) and the
// same gRPC options (shared.ServerOptions, shared.DialOptions), so a request
// too large for production fails here too. go-plugin's TestPluginGRPCConn
// is not used because it serves with gRPC's default 4 MiB receive limit,
// which a request for a few thousand nodes already exceeds.
func Connect(t testing.TB, impl scheduler.Scheduler) scheduler.Scheduler {
	t.Helper()

	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(shared.ServerOptions()...)
	p := &scheduler.Plugin{Impl: impl}
	if err := p.GRPCServer(nil, srv); err != nil {
		t.Fatalf("schedulertest: register server: %v", err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()

	opts := append(shared.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return lis.DialContext(ctx)
		}),
	)
	conn, err := grpc.NewClient("passthrough:///schedulertest", opts...)
	if err != nil {
		srv.Stop()
		<-served
		t.Fatalf("schedulertest: dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})

	raw, err := p.GRPCClient(context.Background(), nil, conn)
	if err != nil {
		t.Fatalf("schedulertest: client: %v", err)
	}
	return raw.(scheduler.Scheduler)
}

// Conformance checks the parts of the Scheduler contract that hold for every
// scheduler plugin, whatever its placement logic:
//
//   - Info names the plugin and lists at least one job type, each with a
//     name, no duplicates, and max_attempts ≥ 1;
//   - for every served type, an eval whose job is absent (purged) yields no
//     placements;
//   - Schedule is deterministic: the same request twice gives equal
//     responses.
//
// The checks run through Connect, so impl is also exercised over gRPC.
func Conformance(t *testing.T, impl scheduler.Scheduler) {
	t.Helper()
	for _, err := range check(t.Context(), Connect(t, impl)) {
		t.Error(err)
	}
}

// check returns every breach of the contract Conformance describes.
func check(ctx context.Context, s scheduler.Scheduler) []error {
	info, err := s.Info(ctx)
	if err != nil {
		return []error{fmt.Errorf("Info: %w", err)}
	}
	var errs []error
	if info.GetName() == "" {
		errs = append(errs, errors.New("Info: empty name"))
	}
	if len(info.GetJobTypes()) == 0 {
		errs = append(errs, errors.New("Info: no job types"))
	}
	seen := map[string]bool{}
	for _, jt := range info.GetJobTypes() {
		typ := jt.GetName()
		switch {
		case typ == "":
			errs = append(errs, errors.New("Info: job type with empty name"))
		case seen[typ]:
			errs = append(errs, fmt.Errorf("Info: job type %q listed twice", typ))
		}
		seen[typ] = true
		if jt.GetMaxAttempts() < 1 {
			errs = append(errs, fmt.Errorf("Info: job type %q: max_attempts %d, want ≥ 1", typ, jt.GetMaxAttempts()))
		}

		absent := Request(typ)
		absent.Job = nil
		absent.Eval.TriggeredBy = "job-deregister"
		resp, err := s.Schedule(ctx, absent)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("type %q: Schedule without a job: %w", typ, err))
		case len(resp.GetPlan().GetNodeAllocation()) != 0:
			errs = append(errs, fmt.Errorf("type %q: Schedule without a job placed %d allocations, want 0",
				typ, len(resp.GetPlan().GetNodeAllocation())))
		}

		first, err1 := s.Schedule(ctx, Request(typ))
		second, err2 := s.Schedule(ctx, Request(typ))
		switch {
		case err1 != nil || err2 != nil:
			errs = append(errs, fmt.Errorf("type %q: Schedule: %w", typ, errors.Join(err1, err2)))
		case !proto.Equal(first, second):
			errs = append(errs, fmt.Errorf("type %q: same request, different responses:\n1st: %v\n2nd: %v", typ, first, second))
		}
	}
	return errs
}

// Request returns a small, valid ScheduleRequest for a new job of type
// jobType: one task group of count 2 running a raw_exec task, three ready
// nodes with room for it, and a pending job-register eval. Tests start from
// it and change what they exercise.
func Request(jobType string) *schedulerpb.ScheduleRequest {
	const (
		jobID = "conformance"
		ns    = "default"
	)
	nodes := make([]*schedulerpb.Node, 3)
	for i := range nodes {
		nodes[i] = &schedulerpb.Node{
			Id:            fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i+1),
			Name:          fmt.Sprintf("node-%d", i+1),
			Datacenter:    "dc1",
			NodePool:      "default",
			ComputedClass: "v1:1",
			Status:        "ready",
			Eligible:      true,
			Attributes:    map[string]string{"kernel.name": "linux", "unique.hostname": fmt.Sprintf("node-%d", i+1)},
			Drivers:       []string{"raw_exec"},
			Capacity:      &schedulerpb.Resources{Cpu: 4000, MemoryMb: 8192, DiskMb: 100000},
			Used:          &schedulerpb.Resources{},
		}
	}
	return &schedulerpb.ScheduleRequest{
		Eval: &schedulerpb.Evaluation{
			Id:             "11111111-2222-3333-4444-555555555555",
			Namespace:      ns,
			Priority:       50,
			Type:           jobType,
			TriggeredBy:    "job-register",
			JobId:          jobID,
			JobModifyIndex: 10,
			Status:         "pending",
		},
		Job: &schedulerpb.Job{
			Id:             jobID,
			Name:           jobID,
			Namespace:      ns,
			Type:           jobType,
			Priority:       50,
			Datacenters:    []string{"dc1"},
			NodePool:       "default",
			JobModifyIndex: 10,
			TaskGroups: []*schedulerpb.TaskGroup{{
				Name:            "group",
				Count:           2,
				EphemeralDiskMb: 300,
				Tasks: []*schedulerpb.Task{{
					Name:       "task",
					Driver:     "raw_exec",
					ConfigJson: []byte(`{"command":"/bin/true"}`),
					Resources:  &schedulerpb.Resources{Cpu: 100, MemoryMb: 64},
				}},
			}},
		},
		Nodes:   nodes,
		Config:  &schedulerpb.SchedulerConfig{},
		Attempt: 1,
	}
}

package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// funcSched is a Scheduler whose Schedule is a function; it records every
// request so tests can count attempts.
type funcSched struct {
	mu       sync.Mutex
	reqs     []*pb.ScheduleRequest
	schedule func(ctx context.Context, call int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error)
}

func (f *funcSched) Info(context.Context) (*pb.InfoResponse, error) {
	return &pb.InfoResponse{Name: "fake", JobTypes: []*pb.JobTypeInfo{{Name: "sysbatch", MaxAttempts: 1}}}, nil
}

func (f *funcSched) Schedule(ctx context.Context, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	call := len(f.reqs)
	f.mu.Unlock()
	return f.schedule(ctx, call, req)
}

func (f *funcSched) calls() []*pb.ScheduleRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.ScheduleRequest(nil), f.reqs...)
}

// fakeRouter serves sysbatch with sched and system in process.
type fakeRouter struct {
	sched       scheduler.Scheduler
	maxAttempts int
}

func (r fakeRouter) Lookup(t string) (scheduler.Scheduler, int, error) {
	if t == "sysbatch" {
		return r.sched, r.maxAttempts, nil
	}
	return builtin.InProcess{}.Lookup(t)
}

func (fakeRouter) ServedTypes() []string { return builtin.InProcess{}.ServedTypes() }

func (fakeRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	return builtin.InProcess{}.JobType(t)
}

// placeOnEveryFreeNode places one alloc of cpu MHz on every node of the
// request that holds no alloc of the job yet, like a sysbatch scheduler
// that ignores node capacity.
func placeOnEveryFreeNode(req *pb.ScheduleRequest, cpu func(*pb.Node) int64) *pb.ScheduleResponse {
	busy := map[string]bool{}
	for _, a := range req.Allocs {
		busy[a.NodeId] = true
	}
	plan := &pb.Plan{DesiredTgUpdates: map[string]*pb.DesiredUpdates{"g": {}}}
	queued := int32(0)
	for _, n := range req.Nodes {
		if busy[n.Id] {
			continue
		}
		queued++
		plan.DesiredTgUpdates["g"].Place++
		plan.NodeAllocation = append(plan.NodeAllocation, &pb.PlacedAlloc{
			Id: uuid.NewString(), Name: req.Job.Id + ".g[0]", NodeId: n.Id, NodeName: n.Name, TaskGroup: "g",
			TaskResources: map[string]*pb.Resources{"t": {Cpu: cpu(n), MemoryMb: 64}},
		})
	}
	return &pb.ScheduleResponse{Plan: plan, QueuedAllocations: map[string]int32{"g": queued}}
}

func registerNodes(t *testing.T, s *Server, nodes ...*structs.Node) {
	t.Helper()
	for _, n := range nodes {
		if _, err := s.Nodes().Register(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
}

func registerJob(t *testing.T, s *Server, job *structs.Job) *structs.JobRegisterResponse {
	t.Helper()
	resp, err := s.Jobs().Register(context.Background(), job, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func waitEvalTerminal(t *testing.T, s *Server, id string) *structs.Evaluation {
	t.Helper()
	var ev *structs.Evaluation
	waitFor(t, 60*time.Second, "eval "+id+" terminal", func() bool {
		ev, _ = s.State().EvalByID(nil, id)
		return ev != nil && ev.TerminalStatus()
	})
	return ev
}

func TestWorkerRecordsSchedulerFailure(t *testing.T) {
	fs := &funcSched{schedule: func(context.Context, int, *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		return &pb.ScheduleResponse{Status: structs.EvalStatusFailed, StatusDescription: "scheduler cannot handle 'job-register' evaluation reason"}, nil
	}}
	s := testServer(t, func(c *Config) { c.Schedulers = fakeRouter{sched: fs, maxAttempts: 2} })
	registerNodes(t, s, testNode("a"))
	resp := registerJob(t, s, testJob("f", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusFailed || ev.StatusDescription != "scheduler cannot handle 'job-register' evaluation reason" {
		t.Fatalf("eval = %q %q", ev.Status, ev.StatusDescription)
	}
	if n := len(fs.calls()); n != 1 {
		t.Fatalf("a failed status must not be retried: %d calls", n)
	}
}

func TestWorkerAttemptLimit(t *testing.T) {
	cases := []struct {
		name        string
		nodes       int
		maxAttempts int
		wantCalls   int
		wantAllocs  int
	}{
		// Every attempt is rejected: the limit is reached after maxAttempts.
		{name: "no progress", nodes: 1, maxAttempts: 3, wantCalls: 3, wantAllocs: 0},
		// The first attempt commits on the good node, which resets the
		// count; two more fruitless attempts reach the limit of two.
		{name: "progress resets the count", nodes: 2, maxAttempts: 2, wantCalls: 3, wantAllocs: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var full string
			fs := &funcSched{schedule: func(_ context.Context, _ int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
				return placeOnEveryFreeNode(req, func(n *pb.Node) int64 {
					if n.Id == full {
						return 5000 // more than the node has
					}
					return 100
				}), nil
			}}
			s := testServer(t, func(c *Config) { c.Schedulers = fakeRouter{sched: fs, maxAttempts: tc.maxAttempts} })
			fullNode := testNode("full")
			full = fullNode.ID
			registerNodes(t, s, fullNode)
			if tc.nodes > 1 {
				registerNodes(t, s, testNode("good"))
			}
			resp := registerJob(t, s, testJob("retry", "sysbatch"))
			ev := waitEvalTerminal(t, s, resp.EvalID)
			want := fmt.Sprintf("maximum attempts reached (%d)", tc.maxAttempts)
			if ev.Status != structs.EvalStatusFailed || ev.StatusDescription != want {
				t.Fatalf("eval = %q %q, want failed %q", ev.Status, ev.StatusDescription, want)
			}
			calls := fs.calls()
			if len(calls) != tc.wantCalls {
				t.Fatalf("scheduler called %d times, want %d", len(calls), tc.wantCalls)
			}
			for i, r := range calls {
				if int(r.Attempt) != i+1 {
					t.Fatalf("call %d has attempt %d", i, r.Attempt)
				}
			}
			allocs, _ := s.State().AllocsByJob(nil, "default", "retry", true)
			if len(allocs) != tc.wantAllocs {
				t.Fatalf("allocs = %d, want %d", len(allocs), tc.wantAllocs)
			}
			for _, a := range allocs {
				if a.NodeID == full {
					t.Fatal("an alloc was committed on the node that cannot fit it")
				}
			}
			if ev.QueuedAllocations["g"] != 1 {
				t.Fatalf("queued = %v, want g:1 (the rejected placement)", ev.QueuedAllocations)
			}
		})
	}
}

func TestWorkerNacksSchedulerError(t *testing.T) {
	real, _, _ := builtin.InProcess{}.Lookup("sysbatch")
	fs := &funcSched{schedule: func(ctx context.Context, call int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		if call == 1 {
			return nil, errors.New("plugin crashed")
		}
		return real.Schedule(ctx, req)
	}}
	s := testServer(t, func(c *Config) {
		c.Schedulers = fakeRouter{sched: fs, maxAttempts: 2}
		c.Broker.InitialNackDelay = 10 * time.Millisecond
	})
	registerNodes(t, s, testNode("a"))
	resp := registerJob(t, s, testJob("nack", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusComplete {
		t.Fatalf("redelivered eval = %q %q", ev.Status, ev.StatusDescription)
	}
	calls := fs.calls()
	if len(calls) != 2 || calls[0].Eval.Id != resp.EvalID || calls[1].Eval.Id != resp.EvalID {
		t.Fatalf("want the same eval delivered twice, got %d calls", len(calls))
	}
	allocs, _ := s.State().AllocsByJob(nil, "default", "nack", true)
	if len(allocs) != 1 {
		t.Fatalf("allocs = %d", len(allocs))
	}
}

func TestWorkerDeliveryLimitFailsEval(t *testing.T) {
	fs := &funcSched{schedule: func(context.Context, int, *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		return nil, errors.New("always broken")
	}}
	s := testServer(t, func(c *Config) {
		c.Schedulers = fakeRouter{sched: fs, maxAttempts: 2}
		c.Broker.InitialNackDelay = -1
		c.Broker.SubsequentNackDelay = -1
	})
	resp := registerJob(t, s, testJob("broken", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusFailed || ev.StatusDescription != "evaluation reached delivery limit (3); last error: scheduler plugin: always broken" {
		t.Fatalf("eval = %q %q", ev.Status, ev.StatusDescription)
	}
	if n := len(fs.calls()); n != 3 {
		t.Fatalf("delivered %d times, want 3", n)
	}
}

// An eval failed at the delivery limit is not the end of its job: the
// leader creates a delayed follow-up in the same entry, which places the
// job once its plugin works again (as Nomad reaps failed evals).
func TestDeliveryLimitFollowup(t *testing.T) {
	real, _, _ := builtin.InProcess{}.Lookup("sysbatch")
	fs := &funcSched{schedule: func(ctx context.Context, call int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		if call <= 3 {
			return nil, errors.New("plugin hung")
		}
		return real.Schedule(ctx, req)
	}}
	s := testServer(t, func(c *Config) {
		c.Schedulers = fakeRouter{sched: fs, maxAttempts: 2}
		c.Broker.InitialNackDelay = -1
		c.Broker.SubsequentNackDelay = -1
		c.FailedEvalFollowupBaseline = 50 * time.Millisecond
		c.FailedEvalFollowupRange = -1
	})
	registerNodes(t, s, testNode("a"))
	resp := registerJob(t, s, testJob("comes-back", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusFailed || ev.NextEval == "" {
		t.Fatalf("eval = %q %q next %q; want failed with a follow-up", ev.Status, ev.StatusDescription, ev.NextEval)
	}
	next := waitEvalTerminal(t, s, ev.NextEval)
	if next.Status != structs.EvalStatusComplete || next.PreviousEval != ev.ID || next.TriggeredBy != structs.EvalTriggerFailedFollowUp || next.WaitUntil.IsZero() {
		t.Fatalf("follow-up = %+v; want a complete, delayed failed-follow-up of %s", next, ev.ID)
	}
	waitFor(t, 10*time.Second, "the job's alloc", func() bool {
		allocs, _ := s.State().AllocsByJob(nil, "default", "comes-back", true)
		return len(allocs) == 1
	})
}

// smallNode has room for exactly one 100 MHz / 64 MB task.
func smallNode(name string) *structs.Node {
	n := testNode(name)
	n.NodeResources.Cpu.CpuShares = 150
	return n
}

func TestWorkerBlockedEvalUnblocksOnFreedCapacity(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	small := smallNode("small")
	registerNodes(t, s, small)

	hogResp := registerJob(t, s, testJob("hog", "sysbatch"))
	if ev := waitEvalTerminal(t, s, hogResp.EvalID); ev.Status != structs.EvalStatusComplete {
		t.Fatalf("hog eval %q", ev.Status)
	}
	hogAllocs, _ := s.State().AllocsByJob(nil, "default", "hog", true)
	if len(hogAllocs) != 1 {
		t.Fatalf("hog allocs = %d", len(hogAllocs))
	}

	resp := registerJob(t, s, testJob("waiter", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusComplete || ev.BlockedEval == "" {
		t.Fatalf("eval = %q, blocked eval %q", ev.Status, ev.BlockedEval)
	}
	if ev.QueuedAllocations["g"] != 1 || ev.FailedTGAllocs["g"] == nil {
		t.Fatalf("queued %v, failed %v", ev.QueuedAllocations, ev.FailedTGAllocs)
	}
	blocked, _ := s.State().EvalByID(nil, ev.BlockedEval)
	if blocked == nil || blocked.Status != structs.EvalStatusBlocked || blocked.NodeID != small.ID ||
		blocked.TriggeredBy != structs.EvalTriggerQueuedAllocs || blocked.QueuedAllocations["g"] != 1 ||
		blocked.PreviousEval != ev.ID {
		t.Fatalf("blocked eval = %+v", blocked)
	}
	// The blocked eval is tracked, pinned to its node, and stays blocked
	// while nothing changes there (it must not be released at once just
	// because the node changed before the eval was scheduled).
	waitFor(t, 5*time.Second, "blocked eval tracked", func() bool {
		st := s.blocked.Stats()
		return st.TotalPinned == 1 && st.ByNode[small.ID] == 1
	})
	if evs, _ := s.State().EvalsByJob(nil, "default", "waiter"); len(evs) != 2 {
		t.Fatalf("waiter has %d evals, want the eval and its blocked eval", len(evs))
	}
	if allocs, _ := s.State().AllocsByJob(nil, "default", "waiter", true); len(allocs) != 0 {
		t.Fatalf("waiter placed without room: %d", len(allocs))
	}

	done := hogAllocs[0].Copy()
	done.ClientStatus = structs.AllocClientStatusComplete
	if err := s.Nodes().UpdateAllocs(ctx, small.ID, small.SecretID, []*structs.Allocation{done}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "waiter placed after capacity freed", func() bool {
		allocs, _ := s.State().AllocsByJob(nil, "default", "waiter", true)
		return len(allocs) == 1 && allocs[0].NodeID == small.ID
	})
	waitFor(t, 15*time.Second, "blocked eval closed", func() bool {
		return evalStatus(t, s, blocked.ID) == structs.EvalStatusComplete
	})
	if evs, _ := s.State().EvalsByJob(nil, "default", "waiter"); len(evs) != 2 {
		t.Fatalf("waiter has %d evals after unblocking, want 2", len(evs))
	}
	if st := s.blocked.Stats(); st.TotalBlocked != 0 {
		t.Fatalf("tracker still holds %+v", st)
	}
}

// A plugin that leaves QueuedAllocations out still gets its placements
// recorded; the core must not count below zero or write to a nil map.
func TestWorkerToleratesMissingQueuedAllocations(t *testing.T) {
	fs := &funcSched{schedule: func(_ context.Context, _ int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		resp := placeOnEveryFreeNode(req, func(*pb.Node) int64 { return 100 })
		resp.QueuedAllocations = nil
		return resp, nil
	}}
	s := testServer(t, func(c *Config) { c.Schedulers = fakeRouter{sched: fs, maxAttempts: 2} })
	registerNodes(t, s, testNode("a"))
	resp := registerJob(t, s, testJob("noq", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusComplete {
		t.Fatalf("eval = %q %q", ev.Status, ev.StatusDescription)
	}
	for tg, n := range ev.QueuedAllocations {
		if n < 0 {
			t.Fatalf("queued[%s] = %d", tg, n)
		}
	}
	if allocs, _ := s.State().AllocsByJob(nil, "default", "noq", true); len(allocs) != 1 {
		t.Fatalf("allocs = %d", len(allocs))
	}
}

// A plan naming allocations the job does not have, or a task group its job
// does not have, is refused whole, never committed with those entries left
// out; the eval fails at the delivery limit with the names in its status.
func TestWorkerRefusesPlanNamingUnknownAllocsAndGroups(t *testing.T) {
	fs := &funcSched{schedule: func(_ context.Context, _ int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		resp := placeOnEveryFreeNode(req, func(*pb.Node) int64 { return 100 })
		node := req.Nodes[0]
		resp.Plan.NodeUpdate = append(resp.Plan.NodeUpdate, &pb.AllocStop{AllocId: "no-such-alloc"})
		resp.Plan.NodeAllocation = append(resp.Plan.NodeAllocation, &pb.PlacedAlloc{
			Id: uuid.NewString(), Name: req.Job.Id + ".ghost[0]", NodeId: node.Id, NodeName: node.Name, TaskGroup: "ghost",
			TaskResources: map[string]*pb.Resources{"t": {Cpu: 100, MemoryMb: 64}},
		})
		return resp, nil
	}}
	s := testServer(t, func(c *Config) {
		c.Schedulers = fakeRouter{sched: fs, maxAttempts: 2}
		c.Broker.InitialNackDelay = -1
		c.Broker.SubsequentNackDelay = -1
	})
	registerNodes(t, s, testNode("a"))
	resp := registerJob(t, s, testJob("bad-plan", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusFailed {
		t.Fatalf("eval = %q %q, want failed", ev.Status, ev.StatusDescription)
	}
	for _, want := range []string{"delivery limit (3)", `"no-such-alloc"`, `"ghost"`} {
		if !strings.Contains(ev.StatusDescription, want) {
			t.Errorf("status description %q does not name %s", ev.StatusDescription, want)
		}
	}
	if allocs, _ := s.State().AllocsByJob(nil, "default", "bad-plan", true); len(allocs) != 0 {
		t.Fatalf("a refused plan committed %d allocs", len(allocs))
	}
}

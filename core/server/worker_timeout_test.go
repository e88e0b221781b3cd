package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testtier"
	"github.com/drover-org/drover/plugins/builtin"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// typeRouter serves each job type with its own scheduler.
type typeRouter map[string]scheduler.Scheduler

func (r typeRouter) Lookup(t string) (scheduler.Scheduler, int, error) {
	s, ok := r[t]
	if !ok {
		return nil, 0, fmt.Errorf("job type %q is not served", t)
	}
	return s, 1, nil
}

func (r typeRouter) ServedTypes() []string { return slices.Sorted(maps.Keys(r)) }

// JobType declares what the built-in plugin of the same name does, with
// one attempt per eval.
func (r typeRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	if _, ok := r[t]; !ok {
		return structs.JobTypeBehavior{}, false
	}
	b, _ := builtin.InProcess{}.JobType(t)
	b.MaxAttempts, b.PerNode = 1, true
	return b, true
}

// A plugin that never answers (its Schedule ignores its context, as a
// SIGSTOPped process would) costs each eval one bounded attempt, and evals
// of other job types complete meanwhile.
func TestWorkerHungPluginTimesOutAndOtherTypesMove(t *testing.T) {
	testtier.Slow(t, "waits out three 500 ms scheduler call timeouts")
	// Full tier, and only waits: beside the other waiting tests.
	t.Parallel()
	release := make(chan struct{})
	hung := &funcSched{schedule: func(context.Context, int, *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		<-release
		return nil, errors.New("released at the end of the test")
	}}
	remote := conformance.Connect(t, hung)
	t.Cleanup(func() { close(release) }) // before Connect's teardown
	sysbatch, _, err := builtin.InProcess{}.Lookup("sysbatch")
	if err != nil {
		t.Fatal(err)
	}
	s := testServer(t, func(c *Config) {
		c.Schedulers = typeRouter{"system": remote, "sysbatch": sysbatch}
		c.NumWorkers = 2
		c.SchedulerCallTimeout = 500 * time.Millisecond
		c.Broker.InitialNackDelay = 20 * time.Millisecond
		c.Broker.SubsequentNackDelay = 20 * time.Millisecond
	})
	registerNodes(t, s, testNode("a"))

	// More evals of the hung type than workers, all older than the other
	// type's eval, so without a bound they would hold every worker.
	var hungEvals []string
	for i := range 6 {
		hungEvals = append(hungEvals, registerJob(t, s, testJob(fmt.Sprintf("hung-%d", i), "system")).EvalID)
	}
	other := registerJob(t, s, testJob("other", "sysbatch")).EvalID

	waitFor(t, 60*time.Second, "the other type's eval to complete", func() bool {
		return evalStatus(t, s, other) == structs.EvalStatusComplete
	})
	for _, id := range hungEvals {
		if st := evalStatus(t, s, id); st != structs.EvalStatusPending {
			t.Fatalf("hung eval %s is %q when the other type completed; it must still be pending (the other type overtook it)", id, st)
		}
	}
	if allocs, _ := s.State().AllocsByJob(nil, "default", "other", true); len(allocs) != 1 {
		t.Fatalf("other job has %d allocs, want 1", len(allocs))
	}

	// The hung type's evals are nacked after each timeout and fail at the
	// delivery limit, having reached the plugin once per delivery.
	first := hungEvals[0]
	var ev *structs.Evaluation
	waitFor(t, 90*time.Second, "the first hung eval to fail", func() bool {
		ev, _ = s.State().EvalByID(nil, first)
		return ev != nil && ev.TerminalStatus()
	})
	if ev.Status != structs.EvalStatusFailed || !strings.Contains(ev.StatusDescription, "delivery limit") {
		t.Fatalf("hung eval = %q %q, want failed at the delivery limit", ev.Status, ev.StatusDescription)
	}
	n := 0
	for _, r := range hung.calls() {
		if r.Eval.Id == first {
			n++
		}
	}
	if n != 3 {
		t.Fatalf("the hung plugin saw eval %s %d times, want once per delivery (3)", first, n)
	}
}

// A plugin that stops answering holds no worker from the other job types
// for its call timeout: past SlowSchedulerCall its type is degraded and a
// spare worker stands in for each worker it holds, so the other type's
// eval completes long before any hung call could time out.
func TestWorkerHungPluginHoldsNoOtherType(t *testing.T) {
	release := make(chan struct{})
	hung := &funcSched{schedule: func(context.Context, int, *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		<-release
		return nil, errors.New("released at the end of the test")
	}}
	remote := conformance.Connect(t, hung)
	t.Cleanup(func() { close(release) })
	sysbatch, _, err := builtin.InProcess{}.Lookup("sysbatch")
	if err != nil {
		t.Fatal(err)
	}
	s := testServer(t, func(c *Config) {
		c.Schedulers = typeRouter{"system": remote, "sysbatch": sysbatch}
		c.NumWorkers = 2
		c.SchedulerCallTimeout = time.Hour // the test would time out first
		c.SlowSchedulerCall = 100 * time.Millisecond
	})
	registerNodes(t, s, testNode("a"))
	// Both workers take a hung eval before the other type's arrives.
	for i := range 2 {
		registerJob(t, s, testJob(fmt.Sprintf("hung-%d", i), "system"))
	}
	waitFor(t, 30*time.Second, "both workers in a hung call", func() bool { return len(hung.calls()) == 2 })
	for i := 2; i < 6; i++ {
		registerJob(t, s, testJob(fmt.Sprintf("hung-%d", i), "system"))
	}
	other := registerJob(t, s, testJob("other", "sysbatch")).EvalID
	waitFor(t, 30*time.Second, "the other type's eval to complete", func() bool {
		return evalStatus(t, s, other) == structs.EvalStatusComplete
	})
	if n := len(hung.calls()); n != 2 {
		t.Errorf("the hung plugin got %d calls; a degraded type gets no more workers than those it holds (2)", n)
	}
}

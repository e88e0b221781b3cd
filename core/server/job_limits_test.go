package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// A job asking for more than max_allocs_per_job (count times candidate
// nodes, for a per-node type) is refused at submit with a 400 naming the
// limit and the numbers, and nothing is written.
func TestRegisterJobRefusesMoreAllocsThanTheLimit(t *testing.T) {
	s := testServer(t, func(c *Config) { c.MaxAllocsPerJob = 10 })
	registerNodes(t, s, testNode("a"), testNode("b"), testNode("c"))

	big := testJob("big", "sysbatch")
	big.TaskGroups[0].Count = 4 // 4 x 3 nodes = 12 > 10
	_, err := s.Jobs().Register(context.Background(), big, false, 0)
	if !errors.Is(err, structs.ErrInvalid) || structs.HTTPStatus(err) != http.StatusBadRequest {
		t.Fatalf("err = %v (HTTP %d), want ErrInvalid / 400", err, structs.HTTPStatus(err))
	}
	for _, want := range []string{"max_allocs_per_job = 10", "12 allocations", `group "g": count 4 on each of 3 candidate nodes`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if j, _ := s.State().JobByID(nil, "default", "big"); j != nil {
		t.Fatal("a refused job was written")
	}
	if _, err := s.Jobs().Plan(context.Background(), big, false); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("plan of the same job: err = %v, want ErrInvalid", err)
	}

	// A per-node job on a cluster without nodes still counts one node.
	empty := testServer(t, func(c *Config) { c.MaxAllocsPerJob = 10 })
	huge := testJob("huge", "sysbatch")
	huge.TaskGroups[0].Count = 1_000_000
	if _, err := empty.Jobs().Register(context.Background(), huge, false, 0); !errors.Is(err, structs.ErrInvalid) {
		t.Fatalf("count 1000000 with no nodes: err = %v, want ErrInvalid", err)
	}

	// Counts whose sum wraps around past math.MaxInt are still refused
	// (on one candidate node, MaxInt + 1 wrapped to a negative total).
	wrap := testJob("wrap", "sysbatch")
	second := *wrap.TaskGroups[0]
	second.Name = "h"
	wrap.TaskGroups = append(wrap.TaskGroups, &second)
	wrap.TaskGroups[0].Count, wrap.TaskGroups[1].Count = math.MaxInt, 1
	if _, err := empty.Jobs().Register(context.Background(), wrap, false, 0); !errors.Is(err, structs.ErrInvalid) ||
		!strings.Contains(err.Error(), "more than") {
		t.Fatalf("counts MaxInt and 1: err = %v, want ErrInvalid saying more than MaxInt", err)
	}
	if j, _ := empty.State().JobByID(nil, "default", "wrap"); j != nil {
		t.Fatal("the job with a wrapping count was written")
	}

	ok := testJob("fits", "sysbatch")
	ok.TaskGroups[0].Count = 3 // 9 <= 10
	registerJob(t, s, ok)
}

// capIgnoringSched places on every free node whatever max_placements says,
// as a third-party plugin might.
func capIgnoringSched() scheduler.Scheduler {
	return &funcSched{schedule: func(_ context.Context, _ int, req *pb.ScheduleRequest) (*pb.ScheduleResponse, error) {
		return placeOnEveryFreeNode(req, func(*pb.Node) int64 { return 100 }), nil
	}}
}

// An eval whose plan would place more than max_allocs_per_eval places that
// many, and a follow-up eval places the next batch, whether or not the
// plugin honours the limit it is given.
func TestWorkerPlacesInBatchesOfMaxAllocsPerEval(t *testing.T) {
	sysbatch, _, err := builtin.InProcess{}.Lookup("sysbatch")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		sched scheduler.Scheduler
	}{{"plugin honours the limit", sysbatch}, {"plugin ignores the limit", capIgnoringSched()}} {
		t.Run(tc.name, func(t *testing.T) {
			s := testServer(t, func(c *Config) {
				c.Schedulers = fakeRouter{sched: tc.sched, maxAttempts: 2}
				c.MaxAllocsPerEval = 3
			})
			for _, n := range []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"} {
				registerNodes(t, s, testNode(n))
			}
			first := registerJob(t, s, testJob("wide", "sysbatch")).EvalID
			waitFor(t, 30*time.Second, "7 allocs placed", func() bool {
				allocs, _ := s.State().AllocsByJob(nil, "default", "wide", true)
				return len(allocs) == 7
			})
			allocs, _ := s.State().AllocsByJob(nil, "default", "wide", true)
			perEval := map[string]int{}
			for _, a := range allocs {
				perEval[a.EvalID]++
			}
			for id, n := range perEval {
				if n > 3 {
					t.Errorf("eval %s placed %d allocs, above max_allocs_per_eval = 3", id, n)
				}
			}
			if len(perEval) != 3 {
				t.Errorf("allocs placed by %d evals, want 3 (3 + 3 + 1)", len(perEval))
			}
			ev := waitEvalTerminal(t, s, first)
			if ev.Status != structs.EvalStatusComplete || ev.NextEval == "" || ev.QueuedAllocations["g"] != 4 {
				t.Fatalf("first eval = %q, next %q, queued %v; want complete with a follow-up and 4 queued", ev.Status, ev.NextEval, ev.QueuedAllocations)
			}
			next := waitEvalTerminal(t, s, ev.NextEval)
			if next.PreviousEval != first || next.TriggeredBy != structs.EvalTriggerQueuedAllocs || next.Status != structs.EvalStatusComplete {
				t.Fatalf("follow-up eval = %+v", next)
			}
		})
	}
}

// A job already in state that asks for more than max_allocs_per_job (the
// cluster grew after it was submitted, or the limit was lowered before a
// restart) is placed up to the limit; the rest stays queued, and its eval
// says why.
func TestWorkerStopsPlacingAtMaxAllocsPerJob(t *testing.T) {
	s := testServer(t, func(c *Config) { c.MaxAllocsPerJob = 4 })
	// Accepted with no nodes: 1 x max(0, 1) <= 4.
	registerJob(t, s, testJob("grows", "system"))
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"} {
		registerNodes(t, s, testNode(n))
	}
	var limited *structs.Evaluation
	waitFor(t, 30*time.Second, "every eval of the job done, one stopped by the limit", func() bool {
		evals, _ := s.State().EvalsByJob(nil, "default", "grows")
		limited = nil
		for _, ev := range evals {
			if !ev.TerminalStatus() {
				return false
			}
			if strings.Contains(ev.StatusDescription, "max_allocs_per_job = 4") {
				limited = ev
			}
		}
		allocs, _ := s.State().AllocsByJob(nil, "default", "grows", true)
		return limited != nil && len(allocs) >= 4
	})
	allocs, _ := s.State().AllocsByJob(nil, "default", "grows", true)
	if len(allocs) != 4 {
		t.Fatalf("allocs = %d, want the limit of 4", len(allocs))
	}
	if limited.Status != structs.EvalStatusComplete || limited.QueuedAllocations["g"] == 0 {
		t.Fatalf("limited eval = %q %q queued %v", limited.Status, limited.StatusDescription, limited.QueuedAllocations)
	}
}

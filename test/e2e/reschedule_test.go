package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/test/internal/harness"
)

// failingBatchJob fails at once, is never restarted on its node, and is
// rescheduled twice within the hour, a second after each failure. Format
// it with the job ID (%q).
const failingBatchJob = `job %q {
  type        = "batch"
  datacenters = ["*"]

  group "g" {
    count = 1

    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts       = 2
      interval       = "1h"
      delay          = "1s"
      delay_function = "constant"
      unlimited      = false
    }

    task "t" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "exit 1"]
      }

      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// A user runs a batch job whose task always fails, with two reschedules
// allowed: the original and its two reschedules fail, and then no more.
// The three allocations are linked by PreviousAllocation/NextAllocation,
// the last one's tracker holds both reschedules, and the job is dead. The
// allocations are read with the official Nomad client's types.
func TestBatchReschedulesFailedAllocs(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-resched"
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "resched.hcl", fmt.Sprintf(failingBatchJob, id)))

	var stubs []alloc
	harness.WaitFor(t, waitTimeout, "job dead with three failed allocs and no eval left to run", func() (bool, string) {
		var j job
		if status, err := a.Do(http.MethodGet, "/v1/job/"+id, nil, &j); err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("GET job: %d %v", status, err)
		}
		stubs = a.AllocsOf(id)
		var evals []evaluation
		a.MustGet("/v1/job/"+id+"/evaluations", &evals)
		var open []string
		for _, e := range evals {
			if e.Status != "complete" && e.Status != "failed" && e.Status != "canceled" {
				open = append(open, e.TriggeredBy+":"+e.Status)
			}
		}
		failed := 0
		for _, al := range stubs {
			if al.ClientStatus == "failed" {
				failed++
			}
		}
		state := fmt.Sprintf("job %s, %d allocs (%d failed), open evals %v", j.Status, len(stubs), failed, open)
		return j.Status == "dead" && len(stubs) >= 3 && failed == len(stubs) && len(open) == 0, state
	})
	if len(stubs) != 3 {
		t.Fatalf("%d allocs, want 3 (the original and two reschedules)", len(stubs))
	}

	byID := map[string]*nomadapi.Allocation{}
	delays := map[string][]int64{} // the events' Delay (ns), which nomad/api leaves out
	var first *nomadapi.Allocation
	for _, s := range stubs {
		var full nomadapi.Allocation
		a.MustGet("/v1/allocation/"+s.ID, &full)
		byID[full.ID] = &full
		var raw struct {
			RescheduleTracker *struct{ Events []struct{ Delay int64 } }
		}
		a.MustGet("/v1/allocation/"+s.ID, &raw)
		if raw.RescheduleTracker != nil {
			for _, e := range raw.RescheduleTracker.Events {
				delays[full.ID] = append(delays[full.ID], e.Delay)
			}
		}
		if full.PreviousAllocation == "" {
			if first != nil {
				t.Fatalf("two allocs without a previous one: %s and %s", first.ID, full.ID)
			}
			first = &full
		}
	}
	if first == nil {
		t.Fatal("no original alloc (every alloc names a previous one)")
	}
	// Walk the lineage: each reschedule names the one before, and carries
	// one more event naming it.
	cur, chain := first, []string{first.ID}
	for i := 0; cur.NextAllocation != ""; i++ {
		next := byID[cur.NextAllocation]
		if next == nil {
			t.Fatalf("alloc %s: NextAllocation %q is not an alloc of the job", cur.ID, cur.NextAllocation)
		}
		if next.PreviousAllocation != cur.ID {
			t.Fatalf("alloc %s: PreviousAllocation = %q, want %s", next.ID, next.PreviousAllocation, cur.ID)
		}
		if next.RescheduleTracker == nil || len(next.RescheduleTracker.Events) != i+1 {
			t.Fatalf("alloc %s (reschedule %d): tracker = %+v, want %d events", next.ID, i+1, next.RescheduleTracker, i+1)
		}
		ev := next.RescheduleTracker.Events[i]
		if ev.PrevAllocID != cur.ID || ev.PrevNodeID != cur.NodeID || delays[next.ID][i] != int64(time.Second) || ev.RescheduleTime == 0 {
			t.Fatalf("alloc %s: last event = %+v, want prev %s on %s after 1s", next.ID, ev, cur.ID, cur.NodeID)
		}
		cur = next
		chain = append(chain, cur.ID)
	}
	if len(chain) != 3 {
		t.Fatalf("lineage %s has %d allocs, want 3", strings.Join(chain, " -> "), len(chain))
	}
	if n := len(cur.RescheduleTracker.Events); n != 2 {
		t.Fatalf("the last alloc's tracker has %d events, want 2", n)
	}
	if cur.FollowupEvalID != "" {
		t.Fatalf("the last alloc, with its attempts used up, has a follow-up eval %s", cur.FollowupEvalID)
	}
}

// A service job (no type) whose task always fails, with two reschedules
// allowed within the hour: the original and its two reschedules fail, and
// then the group stays one short of its count — no fourth allocation, no
// eval left to run — as Nomad leaves it. An operator then forces a
// reschedule (PUT /v1/job/:id/evaluate with EvalOptions.ForceReschedule):
// the last failed allocation is replaced once more, whatever its policy.
func TestServiceReschedulesPerPolicyAndForce(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const id = "e2e-svc-resched"
	hcl := strings.Replace(fmt.Sprintf(failingBatchJob, id), `  type        = "batch"`+"\n", "", 1)
	a.MustCLI("job", "run", "-detach", harness.WriteFile(t, "svc-resched.hcl", hcl))

	settled := func(want int) func() (bool, string) {
		return func() (bool, string) {
			stubs := a.AllocsOf(id)
			var evals []evaluation
			a.MustGet("/v1/job/"+id+"/evaluations", &evals)
			var open []string
			for _, e := range evals {
				if e.Status != "complete" && e.Status != "failed" && e.Status != "canceled" {
					open = append(open, e.TriggeredBy+":"+e.Status)
				}
			}
			failed := 0
			for _, al := range stubs {
				if al.ClientStatus == "failed" {
					failed++
				}
			}
			return len(stubs) >= want && failed == len(stubs) && len(open) == 0,
				fmt.Sprintf("%d allocs (%d failed), open evals %v", len(stubs), failed, open)
		}
	}
	harness.WaitFor(t, waitTimeout, "three failed allocs and no eval left to run", settled(3))
	stubs := a.AllocsOf(id)
	if len(stubs) != 3 {
		t.Fatalf("%d allocs, want 3 (the original and two reschedules)", len(stubs))
	}
	var j job
	a.MustGet("/v1/job/"+id, &j)
	if j.Type != "service" {
		t.Fatalf("job type %q, want service", j.Type)
	}
	var last nomadapi.Allocation
	for _, s := range stubs {
		var full nomadapi.Allocation
		a.MustGet("/v1/allocation/"+s.ID, &full)
		if full.NextAllocation == "" {
			last = full
		}
	}
	if last.ID == "" || last.PreviousAllocation == "" {
		t.Fatalf("no last rescheduled alloc: %+v", last)
	}

	body := map[string]any{"JobID": id, "EvalOptions": map[string]bool{"ForceReschedule": true}}
	if status, err := a.Do(http.MethodPut, "/v1/job/"+id+"/evaluate", body, nil); err != nil || status != http.StatusOK {
		t.Fatalf("PUT evaluate with ForceReschedule: %d %v", status, err)
	}
	harness.WaitFor(t, waitTimeout, "a fourth alloc, forced, and no eval left to run", settled(4))
	var forced nomadapi.Allocation
	for _, s := range a.AllocsOf(id) {
		var full nomadapi.Allocation
		a.MustGet("/v1/allocation/"+s.ID, &full)
		if full.PreviousAllocation == last.ID {
			forced = full
		}
	}
	if forced.ID == "" {
		t.Fatalf("no alloc replaces %s after the forced reschedule", last.ID)
	}
	if n := len(a.AllocsOf(id)); n != 4 {
		t.Errorf("%d allocs after the forced reschedule, want 4 (one forced, then the policy again)", n)
	}
}

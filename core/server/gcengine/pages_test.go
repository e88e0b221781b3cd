package gcengine

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// TestCandidates: what a run offers the plugin from a snapshot: only what
// the safety floor would let it reap (terminal evals, jobs dead or
// stopped, down nodes), cut into pages within the limits.
func TestCandidates(t *testing.T) {
	h := newHarness(t)
	behavior := structs.JobTypeBehavior{RunsToCompletion: true}
	jobs := []*structs.Job{
		{ID: "running", Namespace: ns, Type: "batch", Status: structs.JobStatusRunning},
		{ID: "stopped", Namespace: ns, Type: "batch", Status: structs.JobStatusRunning, Stop: true},
	}
	for _, j := range jobs {
		if err := h.store.UpsertJob(h.next(), j); err != nil {
			t.Fatal(err)
		}
	}
	evals := []*structs.Evaluation{
		{ID: "done-1", Namespace: ns, JobID: "gone", Type: "sysbatch", Status: structs.EvalStatusComplete},
		{ID: "done-2", Namespace: ns, JobID: "gone", Type: "sysbatch", Status: structs.EvalStatusFailed},
		{ID: "pending", Namespace: ns, JobID: "running", Type: "batch", Status: structs.EvalStatusPending},
		{ID: "done-3", Namespace: ns, JobID: "running", Type: "batch", Status: structs.EvalStatusComplete},
	}
	if err := h.store.UpsertEvals(h.next(), evals); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*structs.Node{
		{ID: "ready", Name: "ready", Datacenter: "dc1", NodePool: structs.NodePoolDefault, Status: structs.NodeStatusReady},
		{ID: "down", Name: "down", Datacenter: "dc1", NodePool: structs.NodePoolDefault, Status: structs.NodeStatusDown},
	} {
		if err := h.store.UpsertNode(h.next(), n); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := h.store.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	jobType := func(typ string) (structs.JobTypeBehavior, bool) { return behavior, typ == "sysbatch" }
	ids := func(pages []*gcpb.DecideRequest) []string {
		var out []string
		for i, p := range pages {
			for _, c := range p.GetEvals() {
				out = append(out, fmt.Sprintf("%d:%s(rtc=%t)", i, c.GetEval().GetId(), c.GetEval().GetRunsToCompletion()))
			}
			for _, c := range p.GetJobs() {
				out = append(out, fmt.Sprintf("%d:%s", i, c.GetJob().GetId()))
			}
			for _, n := range p.GetNodes() {
				out = append(out, fmt.Sprintf("%d:%s", i, n.GetId()))
			}
		}
		return out
	}
	cases := []struct {
		name string
		c    gcpb.Collection
		lim  Limits
		want []string
	}{
		{name: "terminal evals, type declared for a gone job", c: gcpb.Collection_COLLECTION_EVAL, lim: DefaultLimits(),
			want: []string{"0:done-1(rtc=true)", "0:done-2(rtc=true)", "0:done-3(rtc=false)"}},
		{name: "evals two to a page", c: gcpb.Collection_COLLECTION_EVAL, lim: Limits{Candidates: 2, Objects: 100},
			want: []string{"0:done-1(rtc=true)", "0:done-2(rtc=true)", "1:done-3(rtc=false)"}},
		{name: "jobs dead or stopped only (a pending eval keeps its job live)", c: gcpb.Collection_COLLECTION_JOB, lim: DefaultLimits(), want: []string{"0:stopped"}},
		{name: "down nodes only", c: gcpb.Collection_COLLECTION_NODE, lim: DefaultLimits(), want: []string{"0:down"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pages, err := Candidates(snap, tc.c, tc.lim, jobType, func() *gcpb.DecideRequest { return &gcpb.DecideRequest{Collection: tc.c} })
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(pages); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("candidates %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGCFactsRescheduleEvents: the GC plugin sees how many reschedules an
// alloc carries and when the last was, to keep a failed alloc whose policy
// window is still open.
func TestGCFactsRescheduleEvents(t *testing.T) {
	job := &structs.Job{ID: "gc", Type: "batch", TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1}}}
	job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 2, Interval: time.Hour}
	a := &structs.Allocation{ID: "a", TaskGroup: "g", Job: job, ClientStatus: structs.AllocClientStatusFailed,
		RescheduleTracker: &structs.RescheduleTracker{Events: []*structs.RescheduleEvent{{RescheduleTime: 10}, {RescheduleTime: 20}}}}
	r := allocFacts(a, job).GetReschedule()
	if !r.GetPolicySet() || r.GetAttempts() != 2 || r.GetEvents() != 2 || r.GetLastEventUnixNano() != 20 {
		t.Fatalf("reschedule facts = %v", r)
	}
	a.RescheduleTracker = nil
	if r := allocFacts(a, job).GetReschedule(); r.GetEvents() != 0 || r.GetLastEventUnixNano() != 0 {
		t.Fatalf("no tracker: facts = %v", r)
	}
}

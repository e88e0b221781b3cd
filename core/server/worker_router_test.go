package server

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/drover-org/drover/sdk/scheduler"
)

// restartingRouter reports sysbatch's plugin unavailable for the first
// downFor lookups, as the plugin host does while the plugin restarts.
type restartingRouter struct {
	downFor int32
	lookups atomic.Int32
}

func (r *restartingRouter) Lookup(t string) (scheduler.Scheduler, int, error) {
	if t == "sysbatch" && r.lookups.Add(1) <= r.downFor {
		return nil, 0, structs.NewError(structs.ErrUnavailable, "plugin %q is down", "scheduler-sysbatch")
	}
	return builtin.InProcess{}.Lookup(t)
}

func (*restartingRouter) ServedTypes() []string { return builtin.InProcess{}.ServedTypes() }

func (*restartingRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	return builtin.InProcess{}.JobType(t)
}

// An eval whose plugin is restarting waits for it, however long that takes
// in deliveries: being handed back while the plugin is down costs none.
func TestWorkerRequeuesWhilePluginUnavailable(t *testing.T) {
	r := &restartingRouter{downFor: 8} // well past the delivery limit of 3
	s := testServer(t, func(c *Config) {
		c.Schedulers = r
		c.Broker.InitialNackDelay = -1
		c.Broker.SubsequentNackDelay = -1
	})
	registerNodes(t, s, testNode("a"))
	resp := registerJob(t, s, testJob("waits", "sysbatch"))
	ev := waitEvalTerminal(t, s, resp.EvalID)
	if ev.Status != structs.EvalStatusComplete {
		t.Fatalf("eval = %q %q; want complete once the plugin is back", ev.Status, ev.StatusDescription)
	}
	if n := r.lookups.Load(); n <= r.downFor {
		t.Fatalf("%d lookups; the eval completed without the plugin coming back?", n)
	}
	if allocs, _ := s.State().AllocsByJob(nil, "default", "waits", true); len(allocs) != 1 {
		t.Fatalf("allocs = %d, want 1", len(allocs))
	}
}

// An eval of a type no plugin serves (its plugin was replaced by one that
// dropped the type) fails with a reason naming the type and the served
// types, instead of waiting in the broker for ever.
func TestWorkerFailsEvalOfUnservedType(t *testing.T) {
	s := testServer(t, nil)
	now := time.Now().UnixNano()
	ev := &structs.Evaluation{
		ID: uuid.NewString(), Namespace: "default", Priority: 50, Type: "retired",
		TriggeredBy: structs.EvalTriggerJobRegister, JobID: "old-job", Status: structs.EvalStatusPending,
		CreateTime: now, ModifyTime: now,
	}
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{ev}}); err != nil {
		t.Fatal(err)
	}
	got := waitEvalTerminal(t, s, ev.ID)
	want := `no scheduler plugin serves job type "retired" (served: batch, service, sysbatch, system)`
	if got.Status != structs.EvalStatusFailed || got.StatusDescription != want {
		t.Fatalf("eval = %q %q, want failed %q", got.Status, got.StatusDescription, want)
	}
	waitFor(t, 15*time.Second, "the broker to let go of the eval", func() bool {
		st := s.broker.Stats()
		return st.TotalReady+st.TotalUnacked+st.TotalWaiting == 0
	})
}

package server

import (
	"errors"
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

// servingRouter is the built-in router that also serves "retired" (with
// the batch scheduler) while serve is set, as an agent does between a
// reload that removed that type's plugin and one that adds it back.
type servingRouter struct {
	serve   atomic.Bool
	lookups atomic.Int32 // of "retired"
}

func (r *servingRouter) Lookup(t string) (scheduler.Scheduler, int, error) {
	if t == "retired" {
		r.lookups.Add(1)
		if !r.serve.Load() {
			return nil, 0, errors.New(`job type "retired" is not served`)
		}
		t = "batch"
	}
	return builtin.InProcess{}.Lookup(t)
}

func (r *servingRouter) ServedTypes() []string {
	types := builtin.InProcess{}.ServedTypes()
	if r.serve.Load() {
		types = append(types, "retired")
	}
	return types
}

func (r *servingRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	if t == "retired" && r.serve.Load() {
		t = "batch"
	}
	return builtin.InProcess{}.JobType(t)
}

// An eval of a type no plugin serves (its plugin was removed by a reload)
// is held, not failed: it stays pending, costs no delivery however often
// it is looked at, and is scheduled once a plugin serves the type again.
// (Until issue 29 it was failed at once.)
func TestWorkerHoldsEvalOfUnservedType(t *testing.T) {
	r := &servingRouter{}
	s := testServer(t, func(c *Config) {
		c.Schedulers = r
		c.Broker.InitialNackDelay = -1
		c.Broker.SubsequentNackDelay = -1
	})
	now := time.Now().UnixNano()
	ev := &structs.Evaluation{
		ID: uuid.NewString(), Namespace: "default", Priority: 50, Type: "retired",
		TriggeredBy: structs.EvalTriggerJobRegister, JobID: "old-job", Status: structs.EvalStatusPending,
		CreateTime: now, ModifyTime: now,
	}
	if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{ev}}); err != nil {
		t.Fatal(err)
	}
	// Past the delivery limit of 3: holding spends none.
	waitFor(t, 15*time.Second, "the eval to be held several times", func() bool { return r.lookups.Load() >= 5 })
	got, err := s.State().EvalByID(nil, ev.ID)
	if err != nil || got == nil || got.Status != structs.EvalStatusPending {
		t.Fatalf("held eval = %+v, %v; want it still pending", got, err)
	}
	r.serve.Store(true)
	got = waitEvalTerminal(t, s, ev.ID)
	if got.Status != structs.EvalStatusComplete {
		t.Fatalf("eval = %q %q, want complete once its type is served", got.Status, got.StatusDescription)
	}
	waitFor(t, 15*time.Second, "the broker to let go of the eval", func() bool {
		st := s.broker.Stats()
		return st.TotalReady+st.TotalUnacked+st.TotalWaiting == 0
	})
}

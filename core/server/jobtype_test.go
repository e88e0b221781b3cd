package server

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/server/schedio"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
	"github.com/drover-org/drover/sdk/scheduler"
)

// The core knows no job type by name: these tests serve made-up types,
// each declaring its own behaviour, and check that the server follows the
// declaration.

// declaredType is a made-up job type: placed by the built-in scheduler
// runAs, behaving as b declares.
type declaredType struct {
	runAs string
	b     structs.JobTypeBehavior
}

// declRouter serves made-up job types.
type declRouter map[string]declaredType

func (r declRouter) Lookup(t string) (scheduler.Scheduler, int, error) {
	d, ok := r[t]
	if !ok {
		return nil, 0, structs.NewError(structs.ErrInvalid, "job type %q is not served", t)
	}
	s, _, err := builtin.InProcess{}.Lookup(d.runAs)
	return s, 2, err
}

func (r declRouter) ServedTypes() []string { return slices.Sorted(maps.Keys(r)) }

func (r declRouter) JobType(t string) (structs.JobTypeBehavior, bool) {
	d, ok := r[t]
	if !ok {
		return structs.JobTypeBehavior{}, false
	}
	b := *d.b.Copy()
	b.MaxAttempts, b.PerNode = 2, true
	return b, true
}

var (
	// oneshot runs to completion once per node, may be periodic, and
	// reaches nodes that join while it runs.
	oneshotRestart = &structs.RestartPolicy{Attempts: 7, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeDelay}
	oneshot        = declaredType{runAs: "sysbatch", b: structs.JobTypeBehavior{
		RunsToCompletion: true, AllowPeriodic: true, EvalOnNodeJoin: true, DefaultRestart: oneshotRestart,
	}}
	// keeper runs on every node until stopped, follows every node change,
	// is evaluated again when an alloc ends, drains last and preempts
	// under the service switch.
	keeper = declaredType{runAs: "system", b: structs.JobTypeBehavior{
		RunningUntilStopped: true, EvalOnNodeUpdate: true, EvalOnAllocEnd: true, DrainLast: true,
		PreemptionSwitch: structs.PreemptSwitchService, RefusedBlocks: []string{structs.BlockReschedule},
		DefaultRestart: &structs.RestartPolicy{Attempts: 2, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
	}}
	// plain declares only a restart default: the zero behaviour.
	plain = declaredType{runAs: "system", b: structs.JobTypeBehavior{
		DefaultRestart: &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
	}}
	// follower is evaluated only when a node holding its allocs changes.
	follower = declaredType{runAs: "system", b: structs.JobTypeBehavior{
		EvalOnAllocNodeChange: true,
		DefaultRestart:        &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
	}}
	// finisher runs to completion and is evaluated again when an alloc
	// ends, as batch is, so a failed one is rescheduled.
	finisher = declaredType{runAs: "sysbatch", b: structs.JobTypeBehavior{
		RunsToCompletion: true, EvalOnAllocEnd: true, DefaultRestart: oneshotRestart,
	}}
	madeUpTypes = declRouter{"oneshot": oneshot, "keeper": keeper, "plain": plain, "follower": follower, "finisher": finisher}
)

func madeUpServer(t *testing.T, mut func(*Config)) *Server {
	return testServer(t, func(c *Config) {
		c.Schedulers = madeUpTypes
		if mut != nil {
			mut(c)
		}
	})
}

// madeUpJob is a one-group job of a made-up type, without a declaration:
// the server stamps the router's.
func madeUpJob(id, typ string) *structs.Job {
	j := testJob(id, typ)
	j.TypeBehavior = nil
	return j
}

// TestRegisterFollowsDeclaredType: the rules and defaults of a job's type
// are its declaration's, which the server stamps into the stored job over
// whatever the submitter sent.
func TestRegisterFollowsDeclaredType(t *testing.T) {
	s := madeUpServer(t, nil)
	ctx := context.Background()
	periodic := func(j *structs.Job) { j.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "@hourly"} }
	tests := []struct {
		name, typ string
		edit      func(*structs.Job)
		want      string // empty: registered
	}{
		{"periodic allowed by the declaration", "oneshot", periodic, ""},
		{"periodic refused by the declaration", "keeper", periodic, "periodic block: not allowed for keeper jobs"},
		{"a submitted declaration is replaced", "plain", func(j *structs.Job) {
			periodic(j)
			j.TypeBehavior = &structs.JobTypeBehavior{AllowPeriodic: true}
		}, "periodic block: not allowed for plain jobs"},
		{"refused block", "keeper", func(j *structs.Job) { j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 1} }, "keeper jobs should not have a reschedule policy"},
		{"block another type refuses", "oneshot", func(j *structs.Job) { j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 1} }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := strings.ReplaceAll(tc.name, " ", "-")
			job := madeUpJob(id, tc.typ)
			tc.edit(job)
			_, err := s.Jobs().Register(ctx, job, false, 0)
			if tc.want != "" {
				var ve *structs.ValidationError
				if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("register = %v, want a ValidationError containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			stored, _ := s.State().JobByID(nil, structs.DefaultNamespace, id)
			want, _ := madeUpTypes.JobType(tc.typ)
			if stored == nil || stored.TypeBehavior == nil || stored.TypeBehavior.AllowPeriodic != want.AllowPeriodic ||
				stored.TypeBehavior.RunsToCompletion != want.RunsToCompletion || stored.TypeBehavior.MaxAttempts != want.MaxAttempts {
				t.Fatalf("stored declaration = %+v, want %+v", stored.TypeBehavior, want)
			}
			if got := stored.TaskGroups[0].RestartPolicy; got == nil || *got != *want.DefaultRestart {
				t.Fatalf("restart policy = %+v, want the declared %+v", got, want.DefaultRestart)
			}
		})
	}
}

// TestPeriodicChildOfDeclaredType: a periodic child is a copy of its
// parent and runs under the parent's declaration.
func TestPeriodicChildOfDeclaredType(t *testing.T) {
	s := madeUpServer(t, nil)
	n := testNode("a")
	registerNodes(t, s, n)
	job := madeUpJob("once", "oneshot")
	job.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "@hourly"}
	registerJob(t, s, job)
	fr, err := s.Jobs().ForcePeriodic(context.Background(), "", "once")
	if err != nil {
		t.Fatal(err)
	}
	if ev := waitEvalTerminal(t, s, fr.EvalID); ev.Status != structs.EvalStatusComplete {
		t.Fatalf("child eval: %s %s", ev.Status, ev.StatusDescription)
	}
	children := childrenOf(t, s, "once")
	if len(children) != 1 || children[0].TypeBehavior == nil || !children[0].TypeBehavior.RunsToCompletion {
		t.Fatalf("children = %+v, want one carrying the oneshot declaration", children)
	}
	child := children[0]
	allocs := allocsOn(t, s, child.ID, n.ID)
	if len(allocs) != 1 {
		t.Fatalf("child has %d allocs on the node", len(allocs))
	}
	u := allocs[0].Copy()
	u.ClientStatus = structs.AllocClientStatusComplete
	if err := s.Nodes().UpdateAllocs(context.Background(), n.ID, n.SecretID, []*structs.Allocation{u}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "finished child dead", func() bool { return jobStatus(s, child.ID) == structs.JobStatusDead })
}

// TestNodeEvalsFollowDeclaredType: which jobs a node change evaluates is
// what their types declare: EvalOnNodeUpdate on every change, EvalOnNodeJoin
// when the node joins and the job is not dead, EvalOnAllocNodeChange when
// the node holding its allocs changes, none of them for the zero
// declaration, whatever allocs it has on the node.
func TestNodeEvalsFollowDeclaredType(t *testing.T) {
	s := madeUpServer(t, nil)
	a := testNode("a")
	registerNodes(t, s, a)
	runJobOn(t, s, madeUpJob("once", "oneshot"), a, structs.AllocClientStatusRunning)
	runJobOn(t, s, madeUpJob("done", "oneshot"), a, structs.AllocClientStatusComplete)
	runJobOn(t, s, madeUpJob("keep", "keeper"), a, structs.AllocClientStatusRunning)
	runJobOn(t, s, madeUpJob("zero", "plain"), a, structs.AllocClientStatusRunning)
	runJobOn(t, s, madeUpJob("follow", "follower"), a, structs.AllocClientStatusRunning)
	waitFor(t, 5*time.Second, "job statuses", func() bool {
		return jobStatus(s, "once") == structs.JobStatusRunning && jobStatus(s, "done") == structs.JobStatusDead
	})

	b := testNode("b")
	b.Status, b.SchedulingEligibility, b.NodePool = structs.NodeStatusReady, structs.NodeSchedulingEligible, structs.NodePoolDefault
	tests := []struct {
		name    string
		node    *structs.Node
		joining bool
		want    []string
	}{
		{"a node joins", b, true, []string{"keep", "once"}},
		{"a node changes", b, false, []string{"keep"}},
		{"the node holding every alloc changes", a, false, []string{"follow", "keep"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evals, err := s.Nodes().nodeEvals(tc.node, tc.joining)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evals {
				got = append(got, e.JobID)
				if e.NodeID != tc.node.ID || e.TriggeredBy != structs.EvalTriggerNodeUpdate {
					t.Errorf("eval %+v: want a node-update eval for the node", e)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("evaluated %v, want %v", got, tc.want)
			}
		})
	}

	// Through the endpoint: the joining node gets the running oneshot job.
	registerNodes(t, s, b)
	waitFor(t, 15*time.Second, "the oneshot and keeper jobs placed on the new node", func() bool {
		return len(allocsOn(t, s, "once", b.ID)) == 1 && len(allocsOn(t, s, "keep", b.ID)) == 1
	})
	for _, id := range []string{"done", "zero", "follow"} {
		if n := len(allocsOn(t, s, id, b.ID)); n != 0 {
			t.Fatalf("%s got %d allocs on the new node", id, n)
		}
	}
}

// TestJobStatusFollowsDeclaredType: a type that runs until stopped is
// running with no node to run on; the zero declaration is not.
func TestJobStatusFollowsDeclaredType(t *testing.T) {
	s := madeUpServer(t, nil)
	for _, tc := range []struct{ id, typ, want string }{
		{"keep", "keeper", structs.JobStatusRunning},
		{"zero", "plain", structs.JobStatusDead},
	} {
		j := madeUpJob(tc.id, tc.typ)
		j.Datacenters = []string{"nowhere"}
		if ev := waitEvalTerminal(t, s, registerJob(t, s, j).EvalID); ev.Status != structs.EvalStatusComplete {
			t.Fatalf("%s: eval %s %s", tc.id, ev.Status, ev.StatusDescription)
		}
		waitFor(t, 5*time.Second, tc.id+" status "+tc.want, func() bool { return jobStatus(s, tc.id) == tc.want })
	}
}

// TestAllocEndFollowsDeclaredType: an alloc that ends is evaluated again
// when its type declares EvalOnAllocEnd, and only then.
func TestAllocEndFollowsDeclaredType(t *testing.T) {
	s := madeUpServer(t, nil)
	n := testNode("a")
	registerNodes(t, s, n)
	for _, tc := range []struct {
		id, typ, status string
		want            bool
	}{
		{"keep", "keeper", structs.AllocClientStatusFailed, true},
		{"keep-done", "keeper", structs.AllocClientStatusComplete, true},
		{"zero", "plain", structs.AllocClientStatusFailed, false},
		{"once", "oneshot", structs.AllocClientStatusFailed, false},
		{"retry", "finisher", structs.AllocClientStatusFailed, true},
		// A completed alloc of a type that runs to completion is done:
		// a follow-up would hold the job pending (issue 27).
		{"retry-done", "finisher", structs.AllocClientStatusComplete, false},
	} {
		// UpdateAllocs writes the follow-up eval with the alloc update,
		// so its absence is final once runJobOn returns.
		runJobOn(t, s, madeUpJob(tc.id, tc.typ), n, tc.status)
		evs, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, e := range evs {
			got = got || (e.TriggeredBy == structs.EvalTriggerFailedFollowUp && e.NodeID == n.ID)
		}
		if got != tc.want {
			t.Errorf("%s (%s, %s): failed-follow-up eval made = %v, want %v", tc.id, tc.typ, tc.status, got, tc.want)
		}
	}
}

// TestDrainFollowsDeclaredType: allocs of a type that runs to completion
// may finish until the deadline, allocs of a DrainLast type leave after all
// others (or stay when the drain ignores system jobs), and the zero
// declaration's leave at once.
func TestDrainFollowsDeclaredType(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(map[bool]string{false: "drain all", true: "ignore system jobs"}[ignore], func(t *testing.T) {
			clock := newFakeClock(time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC))
			s := madeUpServer(t, func(c *Config) { c.Now = clock.Now })
			n := testNode("a")
			registerNodes(t, s, n)
			once := runJobOn(t, s, madeUpJob("once", "oneshot"), n, structs.AllocClientStatusRunning)
			keep := runJobOn(t, s, madeUpJob("keep", "keeper"), n, structs.AllocClientStatusRunning)
			zero := runJobOn(t, s, madeUpJob("zero", "plain"), n, structs.AllocClientStatusRunning)
			if _, err := s.Nodes().UpdateDrain(context.Background(), n.ID, &structs.DrainSpec{Deadline: time.Hour, IgnoreSystemJobs: ignore}, false, nil); err != nil {
				t.Fatal(err)
			}

			s.drainer.Tick()
			if !migrating(t, s, zero.ID) {
				t.Error("the zero declaration's alloc was not migrated at once")
			}
			if migrating(t, s, once.ID) {
				t.Error("the run-to-completion alloc was migrated before the deadline")
			}
			if migrating(t, s, keep.ID) {
				t.Error("the drain-last alloc was migrated while others were live")
			}

			clock.Set(clock.Now().Add(2 * time.Hour))
			s.drainer.Tick()
			if !migrating(t, s, once.ID) {
				t.Error("the run-to-completion alloc was not forced at the deadline")
			}
			if got := migrating(t, s, keep.ID); got == ignore {
				t.Errorf("drain-last alloc migrated = %v with IgnoreSystemJobs = %v", got, ignore)
			}
		})
	}
}

// TestPreemptionFollowsDeclaredSwitch: a job's allocs may preempt others
// (the request lists them) when the configuration switch its type names is
// on, whatever the other switches say.
func TestPreemptionFollowsDeclaredSwitch(t *testing.T) {
	s := madeUpServer(t, nil)
	ctx := context.Background()
	n := testNode("a")
	registerNodes(t, s, n)
	runJobOn(t, s, madeUpJob("victim", "plain"), n, structs.AllocClientStatusRunning)
	allButService := structs.PreemptionConfig{SystemSchedulerEnabled: true, SysBatchSchedulerEnabled: true, BatchSchedulerEnabled: true}
	tests := []struct {
		name, typ string
		cfg       structs.PreemptionConfig
		want      bool
	}{
		{"the named switch on", "keeper", structs.PreemptionConfig{ServiceSchedulerEnabled: true}, true},
		{"every other switch on", "keeper", allButService, false},
		{"no switch named", "plain", structs.PreemptionConfig{SystemSchedulerEnabled: true, SysBatchSchedulerEnabled: true, BatchSchedulerEnabled: true, ServiceSchedulerEnabled: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := s.Operator().SetSchedulerConfig(ctx, &structs.SchedulerConfiguration{PreemptionConfig: tc.cfg}, false, 0); err != nil {
				t.Fatal(err)
			}
			job, err := s.Jobs().prepare(madeUpJob("high", tc.typ))
			if err != nil {
				t.Fatal(err)
			}
			snap, err := s.State().Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			ev := &structs.Evaluation{ID: "ev", Namespace: job.Namespace, JobID: job.ID, Type: job.Type, Priority: job.Priority}
			req, err := schedio.BuildRequest(snap, s.nodeCache, ev, job, 1, s.cfg.Now())
			if err != nil {
				t.Fatal(err)
			}
			if len(req.Nodes) != 1 {
				t.Fatalf("request has %d nodes", len(req.Nodes))
			}
			if got := len(req.Nodes[0].Others) > 0; got != tc.want {
				t.Fatalf("preemptible allocs listed = %v, want %v", got, tc.want)
			}
		})
	}
}

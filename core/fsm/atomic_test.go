package fsm

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// refused is an eval the state store refuses (it has no ID): the second
// write of an entry that fails half-way.
func refused() *structs.Evaluation { return &structs.Evaluation{} }

// hookCount is how many calls a recorder has seen.
func hookCount(rec *recorder) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.evals) + len(rec.clientAlloc) + len(rec.nodes) + len(rec.upserted) + len(rec.deleted)
}

// Every entry that writes several things is one state transaction: when
// its last write is refused, nothing of the earlier ones is left (contents
// and table indexes unchanged) and no hook is told; the same entry with a
// good eval writes everything at its index.
func TestMultiWriteEntryIsAllOrNothing(t *testing.T) {
	upsertedThenEvals := []string{"JobUpserted", "EvalsCommitted"}
	periodic := func() *structs.Job {
		j := mockJob("batch")
		j.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "* * * * *"}
		return j
	}
	cases := []struct {
		name string
		// setup writes what the entry acts on (indexes below 100) and
		// returns the entry built around ev, its last write.
		setup func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry
		// hooks are the calls the good entry makes, in order.
		hooks []string
	}{
		{"job register", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			job := mockJob(structs.JobTypeService)
			return entry{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: ev()}}
		}, upsertedThenEvals},
		{"periodic parent register (job, launch, eval)", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			return entry{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: periodic(), Eval: ev(), Now: time.Now().UnixNano()}}
		}, upsertedThenEvals},
		{"periodic launch (child, parent's launch, eval)", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			parent := periodic()
			mustApply(t, f, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent, Now: time.Unix(1700000000, 0).UnixNano()})
			child := mockJob("batch")
			child.ID, child.ParentID = parent.ID+"/periodic-1800000000", parent.ID
			return entry{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: child, Eval: ev()}}
		}, upsertedThenEvals},
		{"dispatch (child, eval)", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			parent := mockJob("batch")
			parent.ParameterizedJob = &structs.ParameterizedJobConfig{}
			mustApply(t, f, 10, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: parent})
			c := mockJob("batch")
			c.ID, c.ParentID, c.Dispatched, c.DispatchIdempotencyToken = parent.ID+"/dispatch-1-aaaaaaaa", parent.ID, true, "tok"
			c.ParameterizedJob = &structs.ParameterizedJobConfig{}
			return entry{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: c, Eval: ev()}}
		}, upsertedThenEvals},
		{"job deregister stop", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			job := registerJob(t, f, 10, mockJob(structs.JobTypeService))
			return entry{structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: job.Namespace, JobID: job.ID, Eval: ev()}}
		}, upsertedThenEvals},
		{"job deregister purge", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			job := registerJob(t, f, 10, periodic())
			return entry{structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: job.Namespace, JobID: job.ID, Purge: true, Eval: ev()}}
		}, []string{"JobDeleted", "EvalsCommitted"}},
		{"job batch deregister", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			a := registerJob(t, f, 10, mockJob("batch"))
			b := registerJob(t, f, 11, mockJob("batch"))
			return entry{structs.JobBatchDeregisterRequestType, &structs.JobBatchDeregisterRequest{
				Jobs:  []structs.NamespacedID{{ID: a.ID, Namespace: a.Namespace}, {ID: b.ID, Namespace: b.Namespace}},
				Evals: []*structs.Evaluation{mockEval(a.Namespace, a.ID, structs.EvalStatusPending), ev()},
			}}
		}, []string{"JobDeleted", "JobDeleted", "EvalsCommitted"}},
		{"alloc client update (allocs, evals)", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			job := registerJob(t, f, 10, mockJob(structs.JobTypeService))
			n := mockNode()
			mustApply(t, f, 11, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			a := mockAlloc(job, n.ID)
			mustApply(t, f, 12, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{a}})
			return entry{structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{
				Alloc: []*structs.Allocation{{ID: a.ID, ClientStatus: structs.AllocClientStatusFailed}},
				Evals: []*structs.Evaluation{ev()},
			}}
		}, []string{"AllocsClientUpdated", "EvalsCommitted"}},
		{"plan results (allocs, preemption evals)", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			job := registerJob(t, f, 10, mockJob(structs.JobTypeService))
			n := mockNode()
			mustApply(t, f, 11, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			return entry{structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
				Job: job, AllocsUpdated: []*structs.Allocation{mockAlloc(job, n.ID)}, PreemptionEvals: []*structs.Evaluation{ev()},
			}}
		}, []string{"EvalsCommitted"}},
		{"alloc desired transition (allocs, evals)", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			job := registerJob(t, f, 10, mockJob(structs.JobTypeService))
			n := mockNode()
			mustApply(t, f, 11, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: n})
			a := mockAlloc(job, n.ID)
			mustApply(t, f, 12, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{a}})
			yes := true
			return entry{structs.AllocUpdateDesiredTransitionRequestType, &structs.AllocUpdateDesiredTransitionRequest{
				Allocs: map[string]*structs.DesiredTransition{a.ID: {Migrate: &yes}}, Evals: []*structs.Evaluation{ev()},
			}}
		}, []string{"EvalsCommitted"}},
		{"node register (node, evals)", func(t *testing.T, f *FSM, ev func() *structs.Evaluation) entry {
			return entry{structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode(), Evals: []*structs.Evaluation{ev()}}}
		}, []string{"NodeChanged", "EvalsCommitted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, rec := testFSM(t)
			e := tc.setup(t, f, refused)
			before, calls := dump(t, f.State()), hookCount(rec)
			resp := apply(t, f, 100, e.typ, e.msg)
			if err, _ := resp.(error); !errors.Is(err, structs.ErrInvalid) {
				t.Fatalf("entry with a refused eval answered %v, want ErrInvalid", resp)
			}
			if after := dump(t, f.State()); !reflect.DeepEqual(before, after) {
				for k, v := range after {
					if before[k] != v {
						t.Errorf("%s changed by a refused entry:\n before %s\n after  %s", k, before[k], v)
					}
				}
			}
			if n := hookCount(rec); n != calls {
				t.Errorf("hooks told %d times about a refused entry", n-calls)
			}
			if err := f.Failed(); err != nil {
				t.Errorf("a refused entry stopped the FSM: %v", err)
			}

			// The same entry with a good eval writes everything at once,
			// and tells the hooks after the commit, in order: every hook
			// call already finds the entry's last write.
			g, grec := testFSM(t)
			var good *structs.Evaluation
			e = tc.setup(t, g, func() *structs.Evaluation {
				good = mockEval(structs.DefaultNamespace, "", structs.EvalStatusPending)
				return good
			})
			from := len(grec.calls)
			grec.onCall = func(hook string) {
				if got, _ := g.State().EvalByID(nil, good.ID); got == nil {
					t.Errorf("%s called before the entry's eval was committed", hook)
				}
			}
			mustApply(t, g, 100, e.typ, e.msg)
			if got, _ := g.State().EvalByID(nil, good.ID); got == nil || got.CreateIndex != 100 {
				t.Errorf("the good entry's eval = %+v, want it created at 100", got)
			}
			if calls := grec.calls[from:]; !reflect.DeepEqual(calls, tc.hooks) {
				t.Errorf("hooks called %v, want %v", calls, tc.hooks)
			}
		})
	}
}

// gate is a Hooks that, on the entry's first hook call, lets a watcher read
// the state and waits for it: the FSM cannot write anything more of the
// entry meanwhile, so a watcher that found half an entry would say so.
type gate struct {
	recorder
	once sync.Once
	done chan struct{} // closed by the watcher after its read
}

func (g *gate) wait() {
	g.once.Do(func() {
		select {
		case <-g.done:
		case <-time.After(30 * time.Second):
		}
	})
}

func (g *gate) JobUpserted(job *structs.Job) { g.wait(); g.recorder.JobUpserted(job) }
func (g *gate) JobDeleted(ns, id string)     { g.wait(); g.recorder.JobDeleted(ns, id) }
func (g *gate) EvalsCommitted(evals []*structs.Evaluation) {
	g.wait()
	g.recorder.EvalsCommitted(evals)
}

// A reader blocked on a job that an entry changes, woken at the entry's
// index, sees all of the entry: the job, its launch record and its eval;
// or, for a purge, the job gone and the eval there.
func TestWatcherWokenAtIndexSeesWholeEntry(t *testing.T) {
	for _, purge := range []bool{false, true} {
		name := map[bool]string{false: "register", true: "purge"}[purge]
		t.Run(name, func(t *testing.T) {
			g := &gate{done: make(chan struct{})}
			f, err := New(nil, g)
			must(t, err)
			job := mockJob("batch")
			job.Namespace = structs.DefaultNamespace
			job.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "* * * * *"}
			ev := mockEval(structs.DefaultNamespace, job.ID, structs.EvalStatusPending)
			// The setup writes straight to the store: the gate fires once,
			// for the entry under test. Index 10 gives the watcher a
			// minimum index to block on.
			e := entry{structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, Eval: ev, Now: time.Now().UnixNano()}}
			if purge {
				must(t, f.State().UpsertJob(10, job.Copy()))
				e = entry{structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{Namespace: job.Namespace, JobID: job.ID, Purge: true, Eval: ev}}
			} else {
				must(t, f.State().UpsertNode(10, mockNode()))
			}
			minIndex := f.State().LatestIndex()

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			type seen struct {
				index          uint64
				job, eval, lch bool
			}
			got := make(chan seen, 1)
			started := make(chan struct{})
			go func() {
				defer close(g.done)
				var once sync.Once
				idx, err := f.State().BlockingQuery(ctx, minIndex, func(ws memdb.WatchSet, s *state.StateStore) (uint64, error) {
					if _, err := s.JobByID(ws, job.Namespace, job.ID); err != nil {
						return 0, err
					}
					once.Do(func() { close(started) })
					return s.Index(state.TableJobs), nil
				})
				if err != nil {
					t.Errorf("blocking query: %v", err)
				}
				s := f.State()
				j, _ := s.JobByID(nil, job.Namespace, job.ID)
				e, _ := s.EvalByID(nil, ev.ID)
				l, _ := s.PeriodicLaunchByID(nil, job.Namespace, job.ID)
				got <- seen{idx, j != nil, e != nil, l != nil}
			}()
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("watcher did not start")
			}
			applied := make(chan any, 1)
			go func() { applied <- apply(t, f, 100, e.typ, e.msg) }()
			var s seen
			select {
			case s = <-got:
			case <-ctx.Done():
				t.Fatal("watcher not woken")
			}
			if resp := <-applied; resp != nil {
				t.Fatalf("apply: %v", resp)
			}
			if s.index != 100 {
				t.Errorf("woken at %d, want 100", s.index)
			}
			if want := !purge; s.job != want || s.lch != want || !s.eval {
				t.Errorf("woken at the entry's index, saw job %v launch %v eval %v; want job and launch %v, eval true",
					s.job, s.lch, s.eval, want)
			}
		})
	}
}

// entry is a log entry to apply: its type and payload.
type entry struct {
	typ structs.MessageType
	msg any
}

package services

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/drover-org/drover/core/structs"
)

// fakeRunner is an alloc runner as the services see it.
type fakeRunner struct {
	alloc    *structs.Allocation
	tasks    []Task
	persists atomic.Int32
	changes  atomic.Int32
}

func (r *fakeRunner) Alloc() *structs.Allocation { return r.alloc }
func (r *fakeRunner) Node() *structs.Node        { return nil }
func (r *fakeRunner) Tasks() []Task              { return r.tasks }
func (r *fakeRunner) Persist()                   { r.persists.Add(1) }
func (r *fakeRunner) Changed()                   { r.changes.Add(1) }
func (r *fakeRunner) Now() time.Time             { return time.Unix(1000, 0) }

// Through Runner alone: nothing is registered before a main task runs;
// then the group's and the task's services are, once (the state is
// persisted before they leave); a stop deletes them.
func TestAllocSyncFollowsTasks(t *testing.T) {
	web := &structs.Task{Name: "web", Driver: "raw_exec", Services: []*structs.Service{{Name: "t-${NOMAD_TASK_NAME}", Provider: "nomad"}}}
	job := &structs.Job{ID: "j", Namespace: "default", TaskGroups: []*structs.TaskGroup{{Name: "g", Tasks: []*structs.Task{web},
		Services: []*structs.Service{{Name: "grp", Provider: "nomad"}, {Name: "elsewhere", Provider: "consul"}}}}}
	alloc := &structs.Allocation{ID: "a1", Namespace: "default", JobID: "j", TaskGroup: "g", Job: job}
	if !Declared(job.TaskGroups[0]) || Declared(&structs.TaskGroup{Tasks: []*structs.Task{{Name: "x"}}}) {
		t.Fatal("Declared does not tell a group with services from one without")
	}
	task := &fakeTask{spec: web, state: structs.TaskStatePending}
	ar := &fakeRunner{alloc: alloc, tasks: []Task{task}}
	srv := newFakeServer()
	reg := NewRegistrar(srv.UpdateServices, "node-1", "secret", quickRetry, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); reg.Run(ctx) }()
	defer func() { cancel(); <-done }()
	s := New(ctx, ar, Config{Registrar: reg, Region: "global"}, nil)
	defer s.Close()

	s.Sync(false)
	if n := reg.Pending(); n != 0 || len(srv.serviceUpdates()) != 0 || ar.persists.Load() != 0 {
		t.Fatalf("%d pending, %d sent, %d persists before the task ran; want none", n, len(srv.serviceUpdates()), ar.persists.Load())
	}
	task.state = structs.TaskStateRunning
	s.Sync(false)
	s.Sync(false) // no change: nothing queued again
	waitFor(t, "registered", func() bool { return reg.Pending() == 0 && len(srv.serviceRegs()) == 2 })
	regs := srv.serviceRegs()
	if regs["_nomad-task-a1-group-g-grp-"] == nil || regs["_nomad-task-a1-web-t-web-"] == nil {
		t.Fatalf("registrations %v, want the group's grp and web's interpolated t-web", regs)
	}
	if n := len(srv.serviceUpdates()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if ar.persists.Load() != 1 || s.Persisted() == nil || !s.Persisted().Registered {
		t.Errorf("persisted %d times (%+v), want once with Registered", ar.persists.Load(), s.Persisted())
	}
	if has, _ := s.ChecksHealth(); has {
		t.Error("health waits for checks, yet no service has one")
	}

	s.Sync(true)
	waitFor(t, "deregistered", func() bool { return reg.Pending() == 0 && len(srv.serviceRegs()) == 0 })
	s.Sync(false) // stopped for good
	if reg.Pending() != 0 {
		t.Error("a sync after the stop queued registrations")
	}
}

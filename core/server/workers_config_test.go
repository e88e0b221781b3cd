package server

import (
	"errors"
	"slices"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

// TestSchedulerWorkerConfigAtRunTime drives the workers of a running
// server as /v1/agent/schedulers/config does: with 0 workers an eval
// waits; one worker taking only batch schedules a batch eval but leaves
// the waiting system eval (enqueued first) alone; every type again
// schedules it. A refused change (Nomad's rules) changes nothing.
func TestSchedulerWorkerConfigAtRunTime(t *testing.T) {
	s := testServer(t, nil)
	registerNodes(t, s, testNode("a"))
	every := append(slices.Clone(s.workers.ServedTypes()), "_core")
	if !slices.Contains(every, "batch") || !slices.Contains(every, "system") {
		t.Fatalf("served types %v; want batch and system", every)
	}

	if err := s.SetSchedulerWorkerConfig(0, every); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.SchedulerWorkerConfig(); n != 0 || len(s.SchedulerWorkers()) != 0 {
		t.Fatalf("config %d, workers %+v; want none", n, s.SchedulerWorkers())
	}
	sys := registerJob(t, s, testJob("sys", "system"))

	if err := s.SetSchedulerWorkerConfig(1, []string{"_core", "batch"}); err != nil {
		t.Fatal(err)
	}
	if n, types := s.SchedulerWorkerConfig(); n != 1 || !slices.Equal(types, []string{"_core", "batch"}) || len(s.SchedulerWorkers()) != 1 {
		t.Fatalf("config %d %v, workers %+v; want one batch worker", n, types, s.SchedulerWorkers())
	}
	batch := registerJob(t, s, testJob("bat", "batch"))
	if ev := waitEvalTerminal(t, s, batch.EvalID); ev.Status != structs.EvalStatusComplete {
		t.Fatalf("batch eval %s: %s", ev.Status, ev.StatusDescription)
	}
	if ev, _ := s.State().EvalByID(nil, sys.EvalID); ev == nil || ev.Status != structs.EvalStatusPending {
		t.Fatalf("system eval %+v; want it pending while no worker takes system", ev)
	}

	for _, bad := range []struct {
		num     int
		enabled []string
	}{{-1, every}, {2, []string{"batch"}}, {2, []string{"_core", "nosuch"}}} {
		if err := s.SetSchedulerWorkerConfig(bad.num, bad.enabled); !errors.Is(err, structs.ErrInvalid) {
			t.Errorf("SetSchedulerWorkerConfig(%d, %v) = %v; want ErrInvalid", bad.num, bad.enabled, err)
		}
	}
	if n, types := s.SchedulerWorkerConfig(); n != 1 || !slices.Equal(types, []string{"_core", "batch"}) {
		t.Fatalf("after refusals: %d %v; want unchanged", n, types)
	}

	if err := s.SetSchedulerWorkerConfig(2, every); err != nil {
		t.Fatal(err)
	}
	if ev := waitEvalTerminal(t, s, sys.EvalID); ev.Status != structs.EvalStatusComplete {
		t.Fatalf("system eval %s: %s", ev.Status, ev.StatusDescription)
	}
	if n, types := s.SchedulerWorkerConfig(); n != 2 || slices.Contains(types, "_core") || len(s.SchedulerWorkers()) != 2 {
		t.Errorf("config %d %v; want 2 workers of every served type", n, types)
	}
}

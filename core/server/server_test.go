package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

func TestSysbatchPlacesOnEveryNode(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	for _, n := range []string{"a", "b", "c"} {
		if _, err := s.Nodes().Register(ctx, testNode(n)); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := s.Jobs().Register(ctx, testJob("sb", "sysbatch"), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "eval complete", func() bool { return evalStatus(t, s, resp.EvalID) == structs.EvalStatusComplete })
	allocs, err := s.State().AllocsByJob(nil, "default", "sb", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 3 {
		t.Fatalf("want 3 allocs, got %d", len(allocs))
	}
	nodes := map[string]bool{}
	for _, a := range allocs {
		nodes[a.NodeID] = true
		if a.Name != "sb.g[0]" || a.Job == nil || a.DesiredStatus != structs.AllocDesiredStatusRun {
			t.Fatalf("bad alloc %+v", a)
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("allocs not spread over 3 nodes: %v", nodes)
	}
	ev, _ := s.State().EvalByID(nil, resp.EvalID)
	if ev.QueuedAllocations["g"] != 0 {
		t.Fatalf("queued = %v", ev.QueuedAllocations)
	}
}

func TestRegisterJobRefusals(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	bad := testJob("x", "gpu-batch")
	_, err := s.Jobs().Register(ctx, bad, false, 0)
	if !errors.Is(err, structs.ErrInvalid) || !strings.Contains(err.Error(), "served: batch, service, sysbatch, system") {
		t.Fatalf("unknown type: %v", err)
	}
	drv := testJob("y", "sysbatch")
	drv.TaskGroups[0].Tasks[0].Driver = "docker"
	if _, err := s.Jobs().Register(ctx, drv, false, 0); err == nil || !strings.Contains(err.Error(), `unknown driver "docker"`) {
		t.Fatalf("unknown driver: %v", err)
	}
	sys := testJob("z", "system")
	sys.TaskGroups[0].Count = 2
	if _, err := s.Jobs().Register(ctx, sys, false, 0); err == nil || structs.HTTPStatus(err) != 400 {
		t.Fatalf("system count 2: %v", err)
	}
	jobs, _ := s.State().Jobs(nil)
	if len(jobs) != 0 {
		t.Fatalf("refused jobs were written: %d", len(jobs))
	}
}

func TestSchedulerConfigCAS(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	idx0, cfg, err := s.State().SchedulerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.PreemptionConfig.SystemSchedulerEnabled || cfg.PreemptionConfig.SysBatchSchedulerEnabled {
		t.Fatalf("default preemption: %+v", cfg.PreemptionConfig)
	}
	want := &structs.SchedulerConfiguration{PreemptionConfig: structs.PreemptionConfig{SysBatchSchedulerEnabled: true}}
	if ok, _, err := s.Operator().SetSchedulerConfig(ctx, want, true, idx0+1000); err != nil || ok {
		t.Fatalf("stale cas wrote: ok=%v err=%v", ok, err)
	}
	ok, idx, err := s.Operator().SetSchedulerConfig(ctx, want, true, idx0)
	if err != nil || !ok {
		t.Fatalf("cas write: ok=%v err=%v", ok, err)
	}
	got, cfg, _ := s.State().SchedulerConfig()
	if got != idx || !cfg.PreemptionConfig.SysBatchSchedulerEnabled || cfg.PreemptionConfig.SystemSchedulerEnabled {
		t.Fatalf("stored config %d %+v", got, cfg.PreemptionConfig)
	}
	if _, _, err := s.Operator().SetSchedulerConfig(ctx, &structs.SchedulerConfiguration{SchedulerAlgorithm: "random"}, false, 0); structs.HTTPStatus(err) != 400 {
		t.Fatalf("bad algorithm: %v", err)
	}
}

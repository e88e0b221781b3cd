package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
)

// Through Nomad's own client against a dev agent, what Nomad's api suite
// checks of jobs, evals, nodes, the scheduler configuration and the
// agent's health: register/deregister EvalPriority on the created eval
// (TestJobs_Register_EvalPriority, TestJobs_Deregister_EvalPriority),
// the plan's CreatedEvals (TestJobs_Plan), Nomad's default node meta
// (TestNodeMeta_Apply), node events with Drain = DrainStrategy != nil
// (TestNodes_ToggleDrain), PauseEvalBroker holding evals pending and eval
// delete requiring it (TestEvaluations_Delete), RejectJobRegistration, and
// /v1/agent/health (TestAgent_Health).
func TestNomadAPISchedulerSwitches(t *testing.T) {
	a := startDevAgent(t)
	c := nomadClient(t, a.HTTPAddr())
	var nodeID string
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _, err := c.Nodes().List(nil)
		if err == nil && len(nodes) == 1 && nodes[0].Status == "ready" {
			nodeID = nodes[0].ID
			return true, ""
		}
		return false, ""
	})

	if h, err := c.Agent().Health(); err != nil || h.Server == nil || !h.Server.Ok || h.Client == nil || !h.Client.Ok {
		t.Errorf("Health: %+v, %v; want server and client ok", h, err)
	}

	// Every worker lists the served types and Nomad's "_core"
	// (TestAgent_SchedulerWorkersInfo).
	workers, err := c.Agent().GetSchedulerWorkersInfo(nil)
	if err != nil || len(workers.Schedulers) == 0 {
		t.Fatalf("GetSchedulerWorkersInfo: %+v, %v", workers, err)
	}
	for _, w := range workers.Schedulers {
		if !slices.Contains(w.EnabledSchedulers, "_core") || !slices.Contains(w.EnabledSchedulers, "batch") {
			t.Errorf("worker %s schedules %v; want the served types and _core", w.ID, w.EnabledSchedulers)
		}
	}

	// A profile of a server the cluster does not have is Nomad's 500
	// (TestAgentCPUProfile).
	if _, err := c.Agent().CPUProfile(nomad.PprofOptions{Seconds: 1, ServerID: "unknown.global"}, nil); err == nil ||
		!strings.Contains(err.Error(), "500 (unknown Nomad server unknown.global)") {
		t.Errorf("CPUProfile of an unknown server: %v; want Nomad's 500", err)
	}

	node, _, err := c.Nodes().Info(nodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"connect.log_level": "info", "connect.proxy_concurrency": "1",
		"connect.sidecar_image": "envoyproxy/envoy:v${NOMAD_envoy_version}", "connect.gateway_image": "envoyproxy/envoy:v${NOMAD_envoy_version}"} {
		if node.Meta[k] != v {
			t.Errorf("node meta %s = %q, want %q", k, node.Meta[k], v)
		}
	}

	// The defaults are static meta; a null value unsets a key over HTTP
	// (Nomad's TestNodeMeta_Apply).
	bar := "bar"
	mr, err := c.Nodes().Meta().Apply(&nomad.NodeMetaApplyRequest{NodeID: nodeID, Meta: map[string]*string{"connect.log_level": nil, "foo": &bar}}, nil)
	if err != nil {
		t.Fatalf("meta apply with a null value: %v", err)
	}
	if _, ok := mr.Meta["connect.log_level"]; ok || mr.Meta["foo"] != "bar" || mr.Static["connect.log_level"] != "info" {
		t.Errorf("meta after apply: %+v; want connect.log_level unset, foo set, the default still static", mr)
	}

	// EvalPriority on register and deregister; out of range is a 400.
	job := sysbatchJob("prio")
	reg, _, err := c.Jobs().RegisterOpts(job, &nomad.RegisterOptions{EvalPriority: 99}, nil)
	if err != nil {
		t.Fatalf("RegisterOpts: %v", err)
	}
	if ev, _, err := c.Evaluations().Info(reg.EvalID, nil); err != nil || ev.Priority != 99 {
		t.Errorf("register eval: %+v, %v; want priority 99", ev, err)
	}
	if _, _, err := c.Jobs().RegisterOpts(sysbatchJob("prio2"), &nomad.RegisterOptions{EvalPriority: 101}, nil); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "EvalPriority") {
		t.Errorf("EvalPriority 101: %v; want a 400 naming EvalPriority", err)
	}
	evalID, _, err := c.Jobs().DeregisterOpts("prio", &nomad.DeregisterOptions{EvalPriority: 97}, nil)
	if err != nil {
		t.Fatalf("DeregisterOpts: %v", err)
	}
	if ev, _, err := c.Evaluations().Info(evalID, nil); err != nil || ev.Priority != 97 {
		t.Errorf("deregister eval: %+v, %v; want priority 97", ev, err)
	}
	if _, _, err := c.Jobs().DeregisterOpts("prio", &nomad.DeregisterOptions{EvalPriority: -1}, nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("eval_priority=-1: %v; want a 400", err)
	}

	// A plan whose group cannot be placed answers the blocked eval a
	// register would create.
	big := sysbatchJob("big")
	big.Type = new("batch")
	big.TaskGroups[0].Tasks[0].Resources.MemoryMB = new(1 << 30)
	plan, _, err := c.Jobs().Plan(big, true, nil)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if len(plan.CreatedEvals) != 1 || plan.CreatedEvals[0].Status != "blocked" || plan.CreatedEvals[0].JobID != "big" {
		t.Errorf("plan CreatedEvals = %+v; want the blocked eval", plan.CreatedEvals)
	}
	if evs, _, err := c.Jobs().Evaluations("big", nil); err != nil || len(evs) != 0 {
		t.Errorf("the plan wrote evals: %v, %v", evs, err)
	}

	// Node events: Drain equals DrainStrategy != nil on every event.
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	stream, err := c.EventStream().Stream(ctx, map[nomad.Topic][]string{nomad.TopicNode: {nodeID}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes().UpdateDrainOpts(nodeID, &nomad.DrainOptions{DrainSpec: &nomad.DrainSpec{Deadline: 10 * time.Second}}, nil); err != nil {
		t.Fatal(err)
	}
	sawDrain := false
	for !sawDrain {
		select {
		case evs := <-stream:
			if evs.Err != nil {
				t.Fatal(evs.Err)
			}
			for _, e := range evs.Events {
				n, err := e.Node()
				if err != nil || n == nil {
					continue
				}
				if n.Drain != (n.DrainStrategy != nil) {
					t.Fatalf("node event %s: Drain %v with DrainStrategy %+v", e.Type, n.Drain, n.DrainStrategy)
				}
				sawDrain = sawDrain || n.Drain
			}
		case <-ctx.Done():
			t.Fatal("no node event with Drain set")
		}
	}
	if _, err := c.Nodes().UpdateDrain(nodeID, nil, true, nil); err != nil {
		t.Fatal(err)
	}

	// PauseEvalBroker: a register's eval stays pending until resumed;
	// eval delete is refused before it.
	if _, err := c.Evaluations().Delete([]string{reg.EvalID}, nil); err == nil || !strings.Contains(err.Error(), "eval broker is enabled") {
		t.Errorf("eval delete with the broker running: %v; want Nomad's refusal", err)
	}
	setSched := func(mut func(*nomad.SchedulerConfiguration)) {
		t.Helper()
		cur, _, err := c.Operator().SchedulerGetConfiguration(nil)
		if err != nil {
			t.Fatal(err)
		}
		mut(cur.SchedulerConfig)
		if r, _, err := c.Operator().SchedulerSetConfiguration(cur.SchedulerConfig, nil); err != nil || !r.Updated {
			t.Fatalf("SchedulerSetConfiguration: %+v, %v", r, err)
		}
	}
	waitFor(t, "the register eval to finish", func() (bool, string) {
		ev, _, err := c.Evaluations().Info(reg.EvalID, nil)
		if err != nil {
			return false, err.Error()
		}
		return ev.Status == "complete", ev.Status
	})
	setSched(func(s *nomad.SchedulerConfiguration) { s.PauseEvalBroker = true })
	paused, _, err := c.Jobs().Register(sysbatchJob("paused"), nil)
	if err != nil {
		t.Fatal(err)
	}
	// While paused nothing schedules it: once the next write (a second
	// job) is applied the first eval is still pending.
	if _, _, err := c.Jobs().Register(sysbatchJob("paused2"), nil); err != nil {
		t.Fatal(err)
	}
	if ev, _, err := c.Evaluations().Info(paused.EvalID, nil); err != nil || ev.Status != "pending" {
		t.Errorf("eval with the broker paused: %+v, %v; want pending", ev, err)
	}
	if _, err := c.Evaluations().Delete([]string{"8e231cf4-ca48-43ff-b694-5801e69e22fa"}, nil); err == nil || !strings.Contains(err.Error(), "eval not found") {
		t.Errorf("delete of an unknown eval: %v; want eval not found", err)
	}
	if _, err := c.Evaluations().Delete([]string{reg.EvalID}, nil); err != nil {
		t.Errorf("delete of a finished eval with the broker paused: %v", err)
	}
	setSched(func(s *nomad.SchedulerConfiguration) { s.PauseEvalBroker = false })
	waitFor(t, "the held eval to be scheduled", func() (bool, string) {
		ev, _, err := c.Evaluations().Info(paused.EvalID, nil)
		if err != nil {
			return false, err.Error()
		}
		return ev.Status == "complete", ev.Status
	})

	// RejectJobRegistration: register, dispatch and scale refused (ACLs
	// are off: every caller), reads still served.
	setSched(func(s *nomad.SchedulerConfiguration) { s.RejectJobRegistration = true })
	if _, _, err := c.Jobs().Register(sysbatchJob("refused"), nil); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "disabled by the scheduler configuration") {
		t.Errorf("register with RejectJobRegistration: %v; want Nomad's 403", err)
	}
	if _, _, err := c.Jobs().Scale("paused", "g", new(2), "", false, nil, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("scale with RejectJobRegistration: %v; want a 403", err)
	}
	if _, _, err := c.Jobs().Info("paused", nil); err != nil {
		t.Errorf("read with RejectJobRegistration: %v", err)
	}
	setSched(func(s *nomad.SchedulerConfiguration) { s.RejectJobRegistration = false })
	if _, _, err := c.Jobs().Register(sysbatchJob("accepted"), nil); err != nil {
		t.Errorf("register after RejectJobRegistration is cleared: %v", err)
	}
}

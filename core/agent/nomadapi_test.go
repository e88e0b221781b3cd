package agent

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomad "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/internal/testtier"
)

// startDevAgent runs a dev agent in process, its plugins re-executed from
// this test binary, and returns its HTTP address once its node is ready.
func startDevAgent(t *testing.T) *Agent {
	t.Helper()
	testtier.Agent(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DevConfig()
	cfg.DataDir = t.TempDir()
	cfg.Ports.HTTP = ln.Addr().(*net.TCPAddr).Port
	cfg.Ports.RPC = freePort(t)
	logs := &lockedBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "agent", Level: hclog.Debug, Output: logs})
	a, err := New(cfg, Options{Logger: logger, HTTPListener: ln, PluginEnv: []string{testPluginEnv + "=1"}, SelfExe: os.Args[0]})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	var once sync.Once
	t.Cleanup(func() {
		once.Do(a.Shutdown)
		if t.Failed() {
			t.Logf("--- agent log ---\n%s", logs)
		}
	})
	return a
}

// nomadClient is Nomad's official Go client pointed at addr; its idle
// connections are closed when the test ends (goleak checks).
func nomadClient(t *testing.T, addr string) *nomad.Client {
	t.Helper()
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	c, err := nomad.NewClient(&nomad.Config{Address: "http://" + addr, HttpClient: &http.Client{Transport: transport, Timeout: testTimeout}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// saneTime fails unless ts (UnixNano or a time) lies between the test's
// start and now.
func saneTime(t *testing.T, what string, start time.Time, ts time.Time) {
	t.Helper()
	if ts.Before(start.Add(-time.Minute)) || ts.After(time.Now().Add(time.Minute)) {
		t.Errorf("%s = %s; want a time between %s and now", what, ts, start)
	}
}

func sysbatchJob(id string) *nomad.Job {
	job := nomad.NewSysbatchJob(id, id, "global", 50)
	job.Datacenters = []string{"*"}
	task := nomad.NewTask("t", "raw_exec").
		SetConfig("command", "/bin/sh").
		SetConfig("args", []string{"-c", "cat ${NOMAD_TASK_DIR}/in.txt 2>/dev/null; exit 0"}).
		Require(&nomad.Resources{CPU: new(50), MemoryMB: new(32)})
	tg := nomad.NewTaskGroup("g", 1).AddTask(task)
	job.AddTaskGroup(tg)
	return job
}

// The official Nomad Go client (github.com/hashicorp/nomad/api) against a
// dev agent: every call decodes into the client's types and the fields a
// user reads are right.
func TestNomadAPIClient(t *testing.T) {
	start := time.Now()
	a := startDevAgent(t)
	c := nomadClient(t, a.HTTPAddr())

	var node *nomad.NodeListStub
	waitFor(t, "a ready node", func() (bool, string) {
		nodes, _, err := c.Nodes().List(nil)
		if err != nil {
			return false, err.Error()
		}
		if len(nodes) == 1 && nodes[0].Status == "ready" {
			node = nodes[0]
			return true, ""
		}
		return false, fmt.Sprintf("%+v", nodes)
	})

	self, err := c.Agent().Self()
	if err != nil {
		t.Fatalf("Agent().Self: %v", err)
	}
	members, err := c.Agent().Members()
	if err != nil {
		t.Fatalf("Agent().Members: %v", err)
	}
	if self.Member.Name == "" {
		t.Errorf("Agent().Self().Member.Name is empty")
	}
	if len(members.Members) != 1 || members.Members[0].Name != self.Member.Name {
		t.Errorf("Members = %+v; want the one member named %q as Self says", members.Members, self.Member.Name)
	}
	if self.Stats["client"]["node_id"] != node.ID {
		t.Errorf("Self().Stats[client][node_id] = %q; want %q", self.Stats["client"]["node_id"], node.ID)
	}
	if name, err := c.Agent().NodeName(); err != nil || name == "" {
		t.Errorf("Agent().NodeName() = %q, %v; want a name", name, err)
	}

	n, _, err := c.Nodes().Info(node.ID, nil)
	if err != nil {
		t.Fatalf("Nodes().Info: %v", err)
	}
	if n.Name == "" || n.Status != "ready" || n.SchedulingEligibility != "eligible" {
		t.Errorf("node = %s %s %s; want a name, ready, eligible", n.Name, n.Status, n.SchedulingEligibility)
	}
	if n.StatusUpdatedAt == 0 {
		t.Errorf("node StatusUpdatedAt is 0")
	} else {
		saneTime(t, "node StatusUpdatedAt", start, time.Unix(n.StatusUpdatedAt, 0))
	}

	// A sysbatch job runs to completion.
	job := sysbatchJob("compat-sysbatch")
	reg, _, err := c.Jobs().Register(job, nil)
	if err != nil {
		t.Fatalf("Jobs().Register: %v", err)
	}
	if reg.EvalID == "" || reg.JobModifyIndex == 0 {
		t.Errorf("Register = %+v; want an eval and an index", reg)
	}
	waitFor(t, "the sysbatch alloc to complete", func() (bool, string) {
		allocs, _, err := c.Jobs().Allocations(*job.ID, true, nil)
		if err != nil {
			return false, err.Error()
		}
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})

	info, _, err := c.Jobs().Info(*job.ID, nil)
	if err != nil {
		t.Fatalf("Jobs().Info: %v", err)
	}
	if *info.ID != *job.ID || *info.Type != "sysbatch" || *info.TaskGroups[0].Count != 1 {
		t.Errorf("Info = %s %s count %d", *info.ID, *info.Type, *info.TaskGroups[0].Count)
	}
	saneTime(t, "job SubmitTime", start, time.Unix(0, *info.SubmitTime))

	list, _, err := c.Jobs().List(nil)
	if err != nil || len(list) != 1 || list[0].ID != *job.ID {
		t.Fatalf("Jobs().List = %+v, %v", list, err)
	}
	saneTime(t, "job stub SubmitTime", start, time.Unix(0, list[0].SubmitTime))

	sum, _, err := c.Jobs().Summary(*job.ID, nil)
	if err != nil {
		t.Fatalf("Jobs().Summary: %v", err)
	}
	if sum.Summary["g"].Complete != 1 {
		t.Errorf("Summary = %+v; want g complete 1", sum.Summary)
	}

	allocs, _, err := c.Jobs().Allocations(*job.ID, true, nil)
	if err != nil {
		t.Fatalf("Jobs().Allocations: %v", err)
	}
	stub := allocs[0]
	saneTime(t, "alloc stub CreateTime", start, time.Unix(0, stub.CreateTime))
	saneTime(t, "alloc stub ModifyTime", start, time.Unix(0, stub.ModifyTime))
	alloc, _, err := c.Allocations().Info(stub.ID, nil)
	if err != nil {
		t.Fatalf("Allocations().Info: %v", err)
	}
	if alloc.NodeID != node.ID || alloc.JobID != *job.ID || alloc.TaskGroup != "g" || alloc.ClientStatus != "complete" {
		t.Errorf("alloc = node %s job %s group %s status %s", alloc.NodeID, alloc.JobID, alloc.TaskGroup, alloc.ClientStatus)
	}
	ts := alloc.TaskStates["t"]
	if ts == nil || ts.State != "dead" || ts.Failed {
		t.Fatalf("task state = %+v; want dead, not failed", ts)
	}
	saneTime(t, "task StartedAt", start, ts.StartedAt)
	saneTime(t, "task FinishedAt", start, ts.FinishedAt)
	for _, e := range ts.Events {
		saneTime(t, "task event "+e.Type+" Time", start, time.Unix(0, e.Time))
	}
	if l, _, err := c.Allocations().List(nil); err != nil || len(l) != 1 {
		t.Errorf("Allocations().List = %d allocs, %v", len(l), err)
	}

	evals, _, err := c.Jobs().Evaluations(*job.ID, nil)
	if err != nil || len(evals) == 0 {
		t.Fatalf("Jobs().Evaluations = %v, %v", evals, err)
	}
	ev, _, err := c.Evaluations().Info(evals[0].ID, nil)
	if err != nil {
		t.Fatalf("Evaluations().Info: %v", err)
	}
	if ev.JobID != *job.ID || ev.Status != "complete" {
		t.Errorf("eval = %s %s", ev.JobID, ev.Status)
	}
	saneTime(t, "eval CreateTime", start, time.Unix(0, ev.CreateTime))
	saneTime(t, "eval ModifyTime", start, time.Unix(0, ev.ModifyTime))
	if l, _, err := c.Evaluations().List(nil); err != nil || len(l) == 0 {
		t.Errorf("Evaluations().List = %d evals, %v", len(l), err)
	}

	// A plan of a changed job decodes, with Nomad's field-level diff.
	job.TaskGroups[0].Tasks[0].Config["args"] = []string{"-c", "exit 0"}
	plan, _, err := c.Jobs().Plan(job, true, nil)
	if err != nil {
		t.Fatalf("Jobs().Plan: %v", err)
	}
	if plan.Diff == nil || plan.Diff.Type != "Edited" || len(plan.Diff.TaskGroups) != 1 || plan.Diff.TaskGroups[0].Type != "Edited" {
		t.Fatalf("plan diff = %+v; want the group edited", plan.Diff)
	}
	if tasks := plan.Diff.TaskGroups[0].Tasks; len(tasks) != 1 || tasks[0].Name != "t" || tasks[0].Type != "Edited" {
		t.Errorf("plan task diffs = %+v; want task t edited", tasks)
	}
	if !plan.NextPeriodicLaunch.IsZero() {
		t.Errorf("NextPeriodicLaunch = %s; want zero for a job that is not periodic", plan.NextPeriodicLaunch)
	}

	// Register the changed job: its versions, with diffs, decode.
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("Register v1: %v", err)
	}
	versions, diffs, _, err := c.Jobs().Versions(*job.ID, true, nil)
	if err != nil {
		t.Fatalf("Jobs().Versions: %v", err)
	}
	if len(versions) != 2 || *versions[0].Version != 1 || len(diffs) != 1 || diffs[0].Type != "Edited" {
		t.Errorf("Versions = %d versions, diffs %+v; want 2 versions and one edited diff", len(versions), diffs)
	}

	// A parameterized job dispatched with a payload: the child's payload
	// reads back as sent.
	pjob := sysbatchJob("compat-param")
	pjob.ParameterizedJob = &nomad.ParameterizedJobConfig{Payload: "required"}
	pjob.TaskGroups[0].Tasks[0].DispatchPayload = &nomad.DispatchPayloadConfig{File: "in.txt"}
	if _, _, err := c.Jobs().Register(pjob, nil); err != nil {
		t.Fatalf("Register parameterized: %v", err)
	}
	payload := []byte("payload \x00 bytes\n\xff")
	disp, _, err := c.Jobs().Dispatch(*pjob.ID, nil, payload, "", nil)
	if err != nil {
		t.Fatalf("Jobs().Dispatch: %v", err)
	}
	if !strings.HasPrefix(disp.DispatchedJobID, *pjob.ID+"/dispatch-") || disp.EvalID == "" {
		t.Errorf("Dispatch = %+v", disp)
	}
	child, _, err := c.Jobs().Info(disp.DispatchedJobID, nil)
	if err != nil {
		t.Fatalf("Info of the child: %v", err)
	}
	if !bytes.Equal(child.Payload, payload) {
		t.Errorf("child Payload = %q; want %q", child.Payload, payload)
	}
	if child.ParentID == nil || *child.ParentID != *pjob.ID || !child.Dispatched {
		t.Errorf("child ParentID/Dispatched = %v/%v", child.ParentID, child.Dispatched)
	}
	waitFor(t, "the child's alloc to complete", func() (bool, string) {
		allocs, _, err := c.Jobs().Allocations(disp.DispatchedJobID, true, nil)
		if err != nil {
			return false, err.Error()
		}
		return len(allocs) == 1 && allocs[0].ClientStatus == "complete", fmt.Sprintf("%+v", allocs)
	})
	// The task printed its payload file: the log, read through the
	// client's framed stream, holds the dispatched bytes.
	childAllocs, _, err := c.Jobs().Allocations(disp.DispatchedJobID, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	childAlloc, _, err := c.Allocations().Info(childAllocs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	cancel := make(chan struct{})
	defer close(cancel)
	frames, errs := c.AllocFS().Logs(childAlloc, false, "t", "stdout", "start", 0, cancel, nil)
	var logged []byte
	for done := false; !done; {
		select {
		case f, ok := <-frames:
			if !ok {
				done = true
				break
			}
			logged = append(logged, f.Data...)
		case err := <-errs:
			t.Fatalf("AllocFS().Logs: %v", err)
		case <-time.After(testTimeout):
			t.Fatalf("AllocFS().Logs: no end of stream after %s", testTimeout)
		}
	}
	if !bytes.Equal(logged, payload) {
		t.Errorf("child's stdout = %q; want the payload %q", logged, payload)
	}
	if psum, _, err := c.Jobs().Summary(*pjob.ID, nil); err != nil || psum.Children == nil || psum.Children.Dead+psum.Children.Running+psum.Children.Pending != 1 {
		t.Errorf("parent summary = %+v, %v; want one child", psum, err)
	}

	// A periodic job's plan names its next launch as a time.
	periodic := sysbatchJob("compat-periodic")
	periodic.Periodic = &nomad.PeriodicConfig{Enabled: new(true), Spec: new("*/5 * * * *"), SpecType: new("cron")}
	pplan, _, err := c.Jobs().Plan(periodic, true, nil)
	if err != nil {
		t.Fatalf("Plan of a periodic job: %v", err)
	}
	if next := pplan.NextPeriodicLaunch; next.Before(start) || next.After(time.Now().Add(6*time.Minute)) {
		t.Errorf("NextPeriodicLaunch = %s; want within 5 minutes from now", next)
	}
	if pplan.Diff == nil || pplan.Diff.Type != "Added" {
		t.Errorf("plan of a new job: diff %+v; want Added", pplan.Diff)
	}

	if _, _, err := c.Jobs().Register(periodic, nil); err != nil {
		t.Fatalf("Register periodic: %v", err)
	}
	if evalID, _, err := c.Jobs().PeriodicForce(*periodic.ID, nil); err != nil || evalID == "" {
		t.Errorf("PeriodicForce = %q, %v", evalID, err)
	}
	if evalID, _, err := c.Jobs().ForceEvaluate(*job.ID, nil); err != nil || evalID == "" {
		t.Errorf("ForceEvaluate = %q, %v", evalID, err)
	}
	// A periodic parent runs nothing itself: its deregistration has no
	// eval, as in Nomad.
	if _, _, err := c.Jobs().Deregister(*periodic.ID, true, nil); err != nil {
		t.Errorf("Deregister(purge): %v", err)
	}

	// HCL parsing, node and eval allocation lists.
	parsed, err := c.Jobs().ParseHCL(`job "p" {
  type = "sysbatch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`, true)
	if err != nil || *parsed.ID != "p" || *parsed.TaskGroups[0].Count != 1 {
		t.Errorf("ParseHCL = %+v, %v", parsed, err)
	}
	// Two versions of the sysbatch job, the dispatched child, perhaps the
	// forced periodic child.
	if nallocs, _, err := c.Nodes().Allocations(node.ID, nil); err != nil || len(nallocs) < 3 || nallocs[0].NodeID != node.ID {
		t.Errorf("Nodes().Allocations = %d allocs, %v; want at least 3 on the node", len(nallocs), err)
	}
	if eallocs, _, err := c.Evaluations().Allocations(ev.ID, nil); err != nil || len(eallocs) != 1 {
		t.Errorf("Evaluations().Allocations = %d allocs, %v; want 1", len(eallocs), err)
	}
	if sr, err := c.Allocations().Stop(alloc, nil); err != nil || sr.EvalID == "" {
		t.Errorf("Allocations().Stop = %+v, %v", sr, err)
	}

	// A drain: its strategy's times while it runs, then LastDrain.
	if _, err := c.Nodes().UpdateDrain(node.ID, &nomad.DrainSpec{Deadline: time.Hour}, false, nil); err != nil {
		t.Fatalf("UpdateDrain: %v", err)
	}
	waitFor(t, "the drain to complete", func() (bool, string) {
		n, _, err := c.Nodes().Info(node.ID, nil)
		if err != nil {
			return false, err.Error()
		}
		return n.DrainStrategy == nil && n.LastDrain != nil, fmt.Sprintf("strategy %+v last %+v", n.DrainStrategy, n.LastDrain)
	})
	drained, _, err := c.Nodes().Info(node.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	saneTime(t, "LastDrain.StartedAt", start, drained.LastDrain.StartedAt)
	saneTime(t, "LastDrain.UpdatedAt", start, drained.LastDrain.UpdatedAt)
	if drained.LastDrain.Status != "complete" {
		t.Errorf("LastDrain.Status = %q; want complete", drained.LastDrain.Status)
	}
	if len(drained.Events) == 0 {
		t.Errorf("node has no events")
	}
	for _, e := range drained.Events {
		saneTime(t, "node event Timestamp", start, e.Timestamp)
	}

	// Operator reads.
	raft, err := c.Operator().RaftGetConfiguration(nil)
	if err != nil {
		t.Fatalf("RaftGetConfiguration: %v", err)
	}
	if len(raft.Servers) != 1 || !raft.Servers[0].Leader || !raft.Servers[0].Voter {
		t.Errorf("raft servers = %+v; want one voting leader", raft.Servers)
	}
	if sc, _, err := c.Operator().SchedulerGetConfiguration(nil); err != nil || sc.SchedulerConfig == nil {
		t.Errorf("SchedulerGetConfiguration = %+v, %v", sc, err)
	}
	if peers, err := c.Status().Peers(); err != nil || len(peers) != 1 {
		t.Errorf("Status().Peers = %v, %v", peers, err)
	}
	if leader, err := c.Status().Leader(); err != nil || leader == "" {
		t.Errorf("Status().Leader = %q, %v", leader, err)
	}
	if regions, err := c.Regions().List(); err != nil || len(regions) != 1 || regions[0] != "global" {
		t.Errorf("Regions = %v, %v", regions, err)
	}
	// Force GC runs on the server through the built-in gc plugin.
	if err := c.System().GarbageCollect(); err != nil {
		t.Errorf("System().GarbageCollect = %v", err)
	}
	if err := c.System().ReconcileSummaries(); err != nil {
		t.Errorf("System().ReconcileSummaries = %v", err)
	}
}

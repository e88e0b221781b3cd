package client

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/core/client/services"
	"github.com/drover-org/drover/core/structs"
)

// serviceRegs is the registrations the fake server holds, by ID.
func (s *fakeServer) serviceRegs() map[string]*structs.ServiceRegistration {
	s.services.mu.Lock()
	defer s.services.mu.Unlock()
	byID := map[string]*structs.ServiceRegistration{}
	for _, u := range s.services.updates {
		for _, id := range u.DeleteAllocIDs {
			for k, r := range byID {
				if r.AllocID == id {
					delete(byID, k)
				}
			}
		}
		for _, r := range u.Upsert {
			byID[r.ID] = r
		}
	}
	return byID
}

// serviceUpdates is a copy of the updates the fake server accepted.
func (s *fakeServer) serviceUpdates() []*structs.ServiceRegistrationNodeArgs {
	s.services.mu.Lock()
	defer s.services.mu.Unlock()
	return slices.Clone(s.services.updates)
}

func (s *fakeServer) failServiceUpdates(n int) {
	s.services.mu.Lock()
	s.services.fail = n
	s.services.mu.Unlock()
}

// deletedAllocs lists the allocs whose registrations were deleted, in order.
func (s *fakeServer) deletedAllocs() []string {
	var out []string
	for _, u := range s.serviceUpdates() {
		out = append(out, u.DeleteAllocIDs...)
	}
	return out
}

// portAlloc gives an alloc the host ports of a network block.
func portAlloc(a *structs.Allocation, ports ...structs.AllocatedPortMapping) *structs.Allocation {
	a.AllocatedResources = &structs.AllocatedResources{Shared: structs.AllocatedSharedResources{Ports: ports}}
	return a
}

func TestServicesRegisterWhenRunningAndDeregisterOnStop(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())
	web := fakeTaskSpec("server", `{}`)
	web.Services = []*structs.Service{{Name: "${NOMAD_TASK_NAME}-admin", PortLabel: "admin", Provider: "nomad", Tags: []string{"v${NOMAD_ALLOC_INDEX}"}}}
	job := testJob("service", web)
	job.TaskGroups[0].Services = []*structs.Service{
		{Name: "${JOB}-web", PortLabel: "http", Provider: "nomad", Tags: []string{"a", "b"}},
		{Name: "fixed", PortLabel: "8080", Provider: "nomad", Address: "10.1.2.3"},
	}
	a := portAlloc(testAlloc("svc-1", c.NodeID(), job),
		structs.AllocatedPortMapping{Label: "http", Value: 23456, HostIP: "127.0.0.1"},
		structs.AllocatedPortMapping{Label: "admin", Value: 23457, HostIP: "127.0.0.2"})
	srv.upsert(a)
	waitFor(t, "three registrations", func() bool { return len(srv.serviceRegs()) == 3 })

	regs := srv.serviceRegs()
	want := map[string]*structs.ServiceRegistration{
		"_nomad-task-svc-1-group-web-example-web-http": {ServiceName: "example-web", Address: "127.0.0.1", Port: 23456, Tags: []string{"a", "b"}},
		"_nomad-task-svc-1-group-web-fixed-8080":       {ServiceName: "fixed", Address: "10.1.2.3", Port: 8080},
		"_nomad-task-svc-1-server-server-admin-admin":  {ServiceName: "server-admin", Address: "127.0.0.2", Port: 23457, Tags: []string{"v0"}},
	}
	for id, w := range want {
		got := regs[id]
		if got == nil {
			t.Errorf("no registration %s; have %v", id, slices.Collect(maps.Keys(regs)))
			continue
		}
		if got.ServiceName != w.ServiceName || got.Address != w.Address || got.Port != w.Port || !slices.Equal(got.Tags, w.Tags) ||
			got.AllocID != "svc-1" || got.JobID != "example" || got.NodeID != c.NodeID() || got.Datacenter != "dc1" || got.Namespace != "default" {
			t.Errorf("registration %s = %+v, want %+v for alloc svc-1 on this node", id, got, w)
		}
	}
	// Nothing is deleted while the alloc runs.
	if d := srv.deletedAllocs(); len(d) != 0 {
		t.Fatalf("deleted %v while running", d)
	}
	srv.setDesired("svc-1", structs.AllocDesiredStatusStop)
	waitFor(t, "deregistered", func() bool { return len(srv.serviceRegs()) == 0 })
	if d := srv.deletedAllocs(); !slices.Equal(d, []string{"svc-1"}) {
		t.Fatalf("deleted %v, want svc-1 once", d)
	}
	waitFor(t, "stopped", func() bool { return srv.clientStatus("svc-1") == structs.AllocClientStatusComplete })
}

// A group without services never talks to the service endpoints, and a
// registration that cannot be sent is retried until the server takes it.
func TestServicesRetriedUntilAccepted(t *testing.T) {
	srv := newFakeServer()
	srv.failServiceUpdates(3)
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())
	srv.upsert(testAlloc("plain-1", c.NodeID(), testJob("service", fakeTaskSpec("web", `{}`))))
	job := testJob("service", fakeTaskSpec("web", `{}`))
	job.ID = "other"
	job.TaskGroups[0].Services = []*structs.Service{{Name: "s", Provider: "nomad"}}
	srv.upsert(testAlloc("svc-2", c.NodeID(), job))
	waitFor(t, "registered after failures", func() bool { return len(srv.serviceRegs()) == 1 })
	waitFor(t, "plain running", func() bool { return srv.clientStatus("plain-1") == structs.AllocClientStatusRunning })
	for _, u := range srv.serviceUpdates() {
		for _, r := range u.Upsert {
			if r.AllocID != "svc-2" {
				t.Errorf("registration for %s, which has no services", r.AllocID)
			}
		}
	}
}

// checkServer is a real HTTP server whose answer the test sets.
func checkServer(t *testing.T) (*httptest.Server, *atomic.Int32, *atomic.Int32) {
	code := &atomic.Int32{}
	code.Store(200)
	hits := &atomic.Int32{}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/health" || r.Method != http.MethodPost || r.Header.Get("X-Probe") != "yes" {
			http.Error(w, "wrong request "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		w.WriteHeader(int(code.Load()))
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s, code, hits
}

func hostPort(t *testing.T, addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(p, &n)
	return h, n
}

// checkStatusOf is the status a registration carries for its check name.
func checkStatusOf(srv *fakeServer, regID, check string) string {
	r := srv.serviceRegs()[regID]
	if r == nil {
		return ""
	}
	for _, c := range r.Checks {
		if c.Check == check {
			return c.Status
		}
	}
	return ""
}

func TestServiceChecksHTTPTCPScript(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	hs, code, hits := checkServer(t)
	httpHost, httpPort := hostPort(t, hs.Listener.Addr().String())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	_, tcpPort := hostPort(t, ln.Addr().String())

	task := rawTask("web", "/bin/sleep", "600")
	task.Env = map[string]string{"MARKER": "ready"}
	task.Services = []*structs.Service{{Name: "web", PortLabel: "http", Provider: "nomad", Checks: []*structs.ServiceCheck{
		{Name: "http", Type: "http", Path: "/health", Method: "POST", Header: map[string][]string{"X-Probe": {"yes"}},
			Interval: 50 * time.Millisecond, Timeout: 5 * time.Second},
		{Name: "tcp", Type: "tcp", PortLabel: "tcp", Interval: 50 * time.Millisecond, Timeout: 5 * time.Second},
		// Passes once the file named by the task's env exists in the
		// task's directory.
		{Name: "script", Type: "script", Command: "/bin/sh", Args: []string{"-c", "test -f ${MARKER} || exit 2"},
			Interval: 50 * time.Millisecond, Timeout: 5 * time.Second, InitialStatus: "warning"},
	}}}
	job := testJob("service", task)
	a := portAlloc(testAlloc("chk-1", c.NodeID(), job),
		structs.AllocatedPortMapping{Label: "http", Value: httpPort, HostIP: httpHost},
		structs.AllocatedPortMapping{Label: "tcp", Value: tcpPort, HostIP: "127.0.0.1"})
	srv.upsert(a)
	id := "_nomad-task-chk-1-web-web-http"
	waitFor(t, "http and tcp passing, script critical", func() bool {
		return checkStatusOf(srv, id, "http") == structs.CheckSuccess && checkStatusOf(srv, id, "tcp") == structs.CheckSuccess &&
			checkStatusOf(srv, id, "script") == structs.CheckFailure
	})
	// The script check runs in the task's directory with its env.
	_, dir := c.runner("chk-1").task("web").execContext()
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "script passing", func() bool { return checkStatusOf(srv, id, "script") == structs.CheckSuccess })
	code.Store(429)
	waitFor(t, "http warning", func() bool { return checkStatusOf(srv, id, "http") == services.CheckWarning })
	code.Store(503)
	waitFor(t, "http critical", func() bool { return checkStatusOf(srv, id, "http") == structs.CheckFailure })
	code.Store(200)
	waitFor(t, "http passing again", func() bool { return checkStatusOf(srv, id, "http") == structs.CheckSuccess })
	r := srv.serviceRegs()[id]
	for _, ck := range r.Checks {
		if ck.ID == "" || ck.Service != "web" || ck.Group != "web" || ck.Task != "web" || ck.Mode != structs.CheckModeHealthiness || ck.Timestamp == 0 {
			t.Errorf("check result %+v lacks its identity", ck)
		}
		if ck.Check == "http" && (ck.StatusCode != 200 || !strings.Contains(ck.Output, "ok")) {
			t.Errorf("http result %+v, want code 200 and the body", ck)
		}
	}

	// The client keeps every check's latest result, output and all.
	if _, err := c.AllocChecks("nope"); !errors.Is(err, structs.ErrNotFound) {
		t.Errorf("AllocChecks of an unknown alloc: %v, want not found", err)
	}
	if res, err := c.AllocChecks("chk-1"); err != nil || len(res) != 3 {
		t.Errorf("client holds %d check results, want 3", len(res))
	} else {
		for _, r := range res {
			if r.Check == "tcp" && !strings.Contains(r.Output, "Success") {
				t.Errorf("tcp result output %q", r.Output)
			}
		}
	}
	// Steady state: checks keep running and nothing is written.
	before := len(srv.serviceUpdates())
	seen := hits.Load()
	waitFor(t, "ten more http runs", func() bool { return hits.Load() >= seen+10 })
	if after := len(srv.serviceUpdates()); after != before {
		t.Errorf("%d service updates while no check changed status", after-before)
	}

	srv.setDesired("chk-1", structs.AllocDesiredStatusStop)
	waitFor(t, "deregistered", func() bool { return len(srv.serviceRegs()) == 0 })
	waitFor(t, "stopped", func() bool { return srv.clientStatus("chk-1") == structs.AllocClientStatusComplete })
	// The checks stop with the alloc.
	stopped := hits.Load()
	waitFor(t, "the runner to finish", func() bool {
		select {
		case <-c.runner("chk-1").done():
			return true
		default:
			return false
		}
	})
	if h := hits.Load(); h > stopped+1 {
		t.Errorf("http check ran %d times after its alloc stopped", h-stopped)
	}
}

// A client restart keeps the registrations (nothing deleted) and resumes
// the checks with their statuses: a passing check does not flap.
func TestServicesSurviveClientRestart(t *testing.T) {
	srv := newFakeServer()
	dir := t.TempDir()
	c1 := newRawExecClient(t, srv, dir)
	hs, _, hits := checkServer(t)
	host, port := hostPort(t, hs.Listener.Addr().String())
	task := rawTask("web", "/bin/sleep", "600")
	task.Services = []*structs.Service{{Name: "web", PortLabel: "http", Provider: "nomad", Checks: []*structs.ServiceCheck{
		{Name: "http", Type: "http", Path: "/health", Method: "POST", Header: map[string][]string{"X-Probe": {"yes"}},
			Interval: 50 * time.Millisecond, Timeout: 5 * time.Second},
	}}}
	srv.upsert(portAlloc(testAlloc("rs-1", c1.NodeID(), testJob("service", task)),
		structs.AllocatedPortMapping{Label: "http", Value: port, HostIP: host}))
	id := "_nomad-task-rs-1-web-web-http"
	waitFor(t, "passing", func() bool { return checkStatusOf(srv, id, "http") == structs.CheckSuccess })
	c1.Shutdown()
	if d := srv.deletedAllocs(); len(d) != 0 {
		t.Fatalf("client shutdown deleted %v", d)
	}
	mark := len(srv.serviceUpdates())

	c2 := newRawExecClient(t, srv, dir)
	defer c2.Shutdown()
	seen := hits.Load()
	waitFor(t, "checks resumed", func() bool { return hits.Load() >= seen+5 })
	for _, u := range srv.serviceUpdates()[mark:] {
		if len(u.DeleteAllocIDs) != 0 {
			t.Errorf("restart deleted %v", u.DeleteAllocIDs)
		}
		for _, r := range u.Upsert {
			for _, ck := range r.Checks {
				if ck.Status != structs.CheckSuccess {
					t.Errorf("restart re-registered %s with check %s %s", r.ID, ck.Check, ck.Status)
				}
			}
		}
	}
	if checkStatusOf(srv, id, "http") != structs.CheckSuccess {
		t.Fatalf("registration lost its passing check: %+v", srv.serviceRegs()[id])
	}
	srv.setDesired("rs-1", structs.AllocDesiredStatusStop)
	waitFor(t, "deregistered", func() bool { return len(srv.serviceRegs()) == 0 })
	waitFor(t, "stopped", func() bool { return srv.clientStatus("rs-1") == structs.AllocClientStatusComplete })
}

// With health_check = "checks" the alloc is healthy once its tasks run and
// every check has passed for min_healthy_time.
func TestDeploymentHealthWaitsForChecks(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	hs, code, hits := checkServer(t)
	code.Store(500)
	host, port := hostPort(t, hs.Listener.Addr().String())
	// Each job gets its own task: Canonicalize writes into it while the
	// client may be encoding the other job.
	checkedTask := func() *structs.Task {
		task := rawTask("web", "/bin/sleep", "600")
		task.Services = []*structs.Service{{Name: "web", PortLabel: "http", Provider: "nomad", Checks: []*structs.ServiceCheck{
			{Name: "http", Type: "http", Path: "/health", Method: "POST", Header: map[string][]string{"X-Probe": {"yes"}},
				Interval: 50 * time.Millisecond, Timeout: 5 * time.Second},
		}}}
		return task
	}
	job := testJob("service", checkedTask())
	job.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckChecks,
		MinHealthyTime: 100 * time.Millisecond, HealthyDeadline: 5 * time.Minute}
	a := portAlloc(testAlloc("dh-1", c.NodeID(), job), structs.AllocatedPortMapping{Label: "http", Value: port, HostIP: host})
	a.DeploymentID = "dep-1"
	srv.upsert(a)
	// Without min_healthy_time the verdict still waits for the checks to
	// start and pass.
	job0 := testJob("service", checkedTask())
	job0.ID = "zero"
	job0.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1, HealthCheck: structs.UpdateHealthCheckChecks, HealthyDeadline: 5 * time.Minute}
	a0 := portAlloc(testAlloc("dh-0", c.NodeID(), job0), structs.AllocatedPortMapping{Label: "http", Value: port, HostIP: host})
	a0.DeploymentID = "dep-0"
	srv.upsert(a0)
	waitFor(t, "running", func() bool {
		return srv.clientStatus("dh-1") == structs.AllocClientStatusRunning && srv.clientStatus("dh-0") == structs.AllocClientStatusRunning
	})
	seen := hits.Load()
	// Well past min_healthy_time with the check failing: no verdict.
	waitFor(t, "the failing check to run", func() bool { return hits.Load() >= seen+10 })
	for _, id := range []string{"dh-0", "dh-1"} {
		if st := srv.alloc(id).DeploymentStatus; st.HasHealth() {
			t.Fatalf("%s: health %+v while the check fails", id, st)
		}
	}
	passAt := time.Now()
	code.Store(200)
	waitFor(t, "healthy", func() bool {
		return srv.alloc("dh-1").DeploymentStatus.IsHealthy() && srv.alloc("dh-0").DeploymentStatus.IsHealthy()
	})
	if d := time.Since(passAt); d < 100*time.Millisecond {
		t.Errorf("healthy %s after the check passed, before min_healthy_time", d)
	}
	for _, id := range []string{"dh-0", "dh-1"} {
		srv.setDesired(id, structs.AllocDesiredStatusStop)
		waitFor(t, id+" stopped", func() bool { return srv.clientStatus(id) == structs.AllocClientStatusComplete })
	}
}

// A check that keeps failing restarts its task through check_restart; the
// restarts count against the restart policy, which fails the task at last.
func TestCheckRestartRestartsTask(t *testing.T) {
	srv := newFakeServer()
	c := newRawExecClient(t, srv, t.TempDir())
	defer c.Shutdown()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closed := hostPort(t, ln.Addr().String())
	ln.Close() // nothing listens: the check fails
	task := rawTask("web", "/bin/sleep", "600")
	task.Services = []*structs.Service{{Name: "web", PortLabel: "p", Provider: "nomad", Checks: []*structs.ServiceCheck{
		{Name: "tcp", Type: "tcp", Interval: 50 * time.Millisecond, Timeout: time.Second, TaskName: "web",
			CheckRestart: &structs.CheckRestart{Limit: 2}},
	}}}
	job := testJob("service", task)
	job.TaskGroups[0].Tasks[0].RestartPolicy = &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: 10 * time.Millisecond, Mode: structs.RestartPolicyModeFail}
	srv.upsert(portAlloc(testAlloc("cr-1", c.NodeID(), job), structs.AllocatedPortMapping{Label: "p", Value: closed, HostIP: "127.0.0.1"}))
	waitFor(t, "failed after its restart", func() bool { return srv.clientStatus("cr-1") == structs.AllocClientStatusFailed })
	ts := srv.alloc("cr-1").TaskStates["web"]
	signaled := 0
	for _, e := range ts.Events {
		if e.Type == structs.TaskRestartSignal && strings.Contains(e.DisplayMessage+e.Message, `check "tcp" unhealthy`) {
			signaled++
		}
	}
	if ts.Restarts != 1 || signaled != 2 || !ts.Failed {
		t.Fatalf("task %d restarts, %d check restarts (events %v), failed %v; want 1, 2, failed", ts.Restarts, signaled, eventTypes(ts), ts.Failed)
	}
	waitFor(t, "deregistered", func() bool { return len(srv.serviceRegs()) == 0 })
}

// A stop deregisters the services first, then waits out the group's and
// the task's shutdown_delay before killing; no_shutdown_delay skips both.
func TestShutdownDelay(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())
	const groupDelay, taskDelay = 500 * time.Millisecond, 300 * time.Millisecond
	mk := func(id string) *structs.Allocation {
		tk := fakeTaskSpec("web", `{}`)
		tk.ShutdownDelay = taskDelay
		job := testJob("service", tk)
		job.ID = id
		d := groupDelay
		job.TaskGroups[0].ShutdownDelay = &d
		job.TaskGroups[0].Services = []*structs.Service{{Name: id, Provider: "nomad"}}
		return testAlloc(id, c.NodeID(), job)
	}
	srv.upsert(mk("sd-1"))
	quick := mk("sd-2")
	yes := true
	quick.DesiredTransition.NoShutdownDelay = &yes
	srv.upsert(quick)
	waitFor(t, "registered", func() bool { return len(srv.serviceRegs()) == 2 })

	stopped := time.Now()
	srv.setDesired("sd-1", structs.AllocDesiredStatusStop)
	waitFor(t, "sd-1 deregistered", func() bool {
		for _, r := range srv.serviceRegs() {
			if r.AllocID == "sd-1" {
				return false
			}
		}
		return true
	})
	if !world.running("sd-1/web") && time.Since(stopped) < groupDelay {
		t.Fatalf("task killed before its services' shutdown_delay")
	}
	waitFor(t, "sd-1 complete", func() bool { return srv.clientStatus("sd-1") == structs.AllocClientStatusComplete })
	if took := time.Since(stopped); took < groupDelay+taskDelay {
		t.Errorf("stopped in %s, before the group's and the task's shutdown_delay (%s)", took, groupDelay+taskDelay)
	}
	if ts := srv.alloc("sd-1").TaskStates["web"]; !hasEvent(ts, taskWaitingShutdownDelay) || ts.Failed {
		t.Errorf("task events %v, want %q and not failed", eventTypes(ts), taskWaitingShutdownDelay)
	}

	srv.setDesired("sd-2", structs.AllocDesiredStatusStop)
	waitFor(t, "sd-2 complete", func() bool { return srv.clientStatus("sd-2") == structs.AllocClientStatusComplete })
	if ts := srv.alloc("sd-2").TaskStates["web"]; hasEvent(ts, taskWaitingShutdownDelay) {
		t.Errorf("no_shutdown_delay waited: events %v", eventTypes(ts))
	}
	if len(srv.serviceRegs()) != 0 {
		t.Errorf("registrations left: %v", srv.serviceRegs())
	}
}

// An in-place update that renames a service replaces the alloc's
// registrations: the old name goes, the new one comes.
func TestServicesFollowInPlaceUpdate(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())
	job := testJob("service", fakeTaskSpec("web", `{}`))
	job.TaskGroups[0].Services = []*structs.Service{{Name: "one", Provider: "nomad"}, {Name: "kept", Provider: "nomad"}}
	srv.upsert(testAlloc("ip-1", c.NodeID(), job))
	names := func() []string {
		var out []string
		for _, r := range srv.serviceRegs() {
			out = append(out, r.ServiceName)
		}
		slices.Sort(out)
		return out
	}
	waitFor(t, "registered", func() bool { return slices.Equal(names(), []string{"kept", "one"}) })
	a := srv.alloc("ip-1").Copy()
	j2 := a.Job.Copy()
	j2.Version = 1
	j2.TaskGroups[0].Services = []*structs.Service{{Name: "two", Provider: "nomad"}, {Name: "kept", Provider: "nomad"}}
	a.Job = j2
	srv.upsert(a)
	waitFor(t, "renamed", func() bool { return slices.Equal(names(), []string{"kept", "two"}) })
	if world.startCount("web") != 1 {
		t.Errorf("task started %d times; an in-place update keeps it", world.startCount("web"))
	}
}

// An alloc whose task never ran registered nothing and deletes nothing:
// no write reaches the servers for it.
func TestServicesNothingSentForAllocThatNeverRan(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())
	job := testJob("service", fakeTaskSpec("web", `{"start_error": "boom", "invalid": true}`))
	job.TaskGroups[0].Services = []*structs.Service{{Name: "s", Provider: "nomad"}}
	srv.upsert(testAlloc("nr-1", c.NodeID(), job))
	waitFor(t, "failed", func() bool { return srv.clientStatus("nr-1") == structs.AllocClientStatusFailed })
	waitFor(t, "runner done", func() bool {
		select {
		case <-c.runner("nr-1").done():
			return true
		default:
			return false
		}
	})
	if n := c.services.Pending(); n != 0 || len(srv.serviceUpdates()) != 0 {
		t.Fatalf("%d service updates sent and %d pending for an alloc that never ran", len(srv.serviceUpdates()), n)
	}
}

// A task's services go when the task dies while its alloc runs on.
func TestTaskServiceGoesWithItsTask(t *testing.T) {
	srv := newFakeServer()
	world := newFakeWorld()
	c := newTestClient(t, srv, world, t.TempDir())
	web := fakeTaskSpec("web", `{}`)
	web.Services = []*structs.Service{{Name: "web", Provider: "nomad"}}
	side := fakeTaskSpec("announce", `{}`)
	side.Lifecycle = &structs.TaskLifecycleConfig{Hook: hookPoststart}
	side.Services = []*structs.Service{{Name: "announce", Provider: "nomad"}}
	srv.upsert(testAlloc("td-1", c.NodeID(), testJob("service", web, side)))
	waitFor(t, "both registered", func() bool { return len(srv.serviceRegs()) == 2 })
	world.finish("td-1/announce", 0)
	waitFor(t, "announce deregistered", func() bool {
		regs := srv.serviceRegs()
		return len(regs) == 1 && regs["_nomad-task-td-1-web-web-"] != nil
	})
	// The client reports in batches: wait for a report past pending; the
	// poststart task's end must not have ended the alloc.
	waitFor(t, "the alloc reported", func() bool {
		st := srv.clientStatus("td-1")
		return st != "" && st != structs.AllocClientStatusPending
	})
	if st := srv.clientStatus("td-1"); st != structs.AllocClientStatusRunning {
		t.Fatalf("alloc %s, want running", st)
	}
}

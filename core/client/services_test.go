package client

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/hashicorp/go-hclog"

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

func TestCheckStatusMapping(t *testing.T) {
	tests := []struct {
		name string
		got  checkHealth
		want string
	}{
		{"http 200", httpHealth(200), structs.CheckSuccess},
		{"http 204", httpHealth(204), structs.CheckSuccess},
		{"http 299", httpHealth(299), structs.CheckSuccess},
		{"http 301", httpHealth(301), structs.CheckFailure},
		{"http 404", httpHealth(404), structs.CheckFailure},
		{"http 429", httpHealth(429), CheckWarning},
		{"http 500", httpHealth(500), structs.CheckFailure},
		{"http 199", httpHealth(199), structs.CheckFailure},
		{"script 0", scriptHealth(0), structs.CheckSuccess},
		{"script 1", scriptHealth(1), CheckWarning},
		{"script 2", scriptHealth(2), structs.CheckFailure},
		{"script 127", scriptHealth(127), structs.CheckFailure},
		{"initial passing", initialHealth("passing"), structs.CheckSuccess},
		{"initial warning", initialHealth("warning"), CheckWarning},
		{"initial critical", initialHealth("critical"), structs.CheckFailure},
		{"initial unset", initialHealth(""), structs.CheckPending},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.got.reported(); got != tt.want {
				t.Errorf("reported %q, want %q", got, tt.want)
			}
			if back := healthFromReported(tt.got.reported()); back != tt.got {
				t.Errorf("status %q reads back as %d, want %d", tt.want, back, tt.got)
			}
		})
	}
}

func TestCheckObserveThresholds(t *testing.T) {
	now := time.Unix(1000, 0)
	pass, fail := checkOutcome{health: checkPassing}, checkOutcome{health: checkCritical}
	tests := []struct {
		name    string
		check   structs.ServiceCheck
		initial checkHealth
		runs    []checkOutcome
		want    []bool // changed after each run
		final   checkHealth
	}{
		{"first pass flips", structs.ServiceCheck{}, checkPending, []checkOutcome{pass, pass}, []bool{true, false}, checkPassing},
		{"first failure flips a pending check", structs.ServiceCheck{FailuresBeforeCritical: 3}, checkPending, []checkOutcome{fail}, []bool{true}, checkCritical},
		{"success_before_passing", structs.ServiceCheck{SuccessBeforePassing: 3}, checkCritical, []checkOutcome{pass, pass, pass}, []bool{false, false, true}, checkPassing},
		{"failures_before_critical", structs.ServiceCheck{FailuresBeforeCritical: 2}, checkPassing, []checkOutcome{fail, pass, fail, fail}, []bool{false, false, false, true}, checkCritical},
		{"same status twice reports once", structs.ServiceCheck{}, checkPassing, []checkOutcome{fail, fail}, []bool{true, false}, checkCritical},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &checkState{spec: &checkSpec{check: &tt.check}, health: tt.initial}
			st.reported = st.status(tt.initial, 0, "", now)
			for i, o := range tt.runs {
				if got := st.observe(o, now); got != tt.want[i] {
					t.Errorf("run %d: changed %v, want %v", i+1, got, tt.want[i])
				}
			}
			if st.health != tt.final || st.reported.Status != tt.final.reported() {
				t.Errorf("health %d (reported %q), want %d", st.health, st.reported.Status, tt.final)
			}
		})
	}
}

func TestTruncateOutput(t *testing.T) {
	long := strings.Repeat("é", structs.MaxCheckOutputBytes) // 2 bytes each
	got := truncateOutput(long)
	if len(got) > structs.MaxCheckOutputBytes || len(got) < structs.MaxCheckOutputBytes-1 {
		t.Fatalf("truncated to %d bytes, want about %d", len(got), structs.MaxCheckOutputBytes)
	}
	if !strings.HasPrefix(long, got) || strings.ContainsRune(got, '\uFFFD') {
		t.Fatalf("truncation broke a character")
	}
	if truncateOutput("short") != "short" {
		t.Fatalf("short output changed")
	}
}

func TestServiceRegistrarBatchesRetriesAndOrders(t *testing.T) {
	srv := newFakeServer()
	srv.failServiceUpdates(2)
	r := newServiceRegistrar(srv.UpdateServices, "node-1", "secret", backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}, hclog.NewNullLogger())
	// More than one request's worth, for two allocs.
	n := structs.MaxRegistrationsPerRequest + 10
	for i := range n {
		alloc := "a1"
		if i%2 == 1 {
			alloc = "a2"
		}
		r.upsert(&structs.ServiceRegistration{ID: fmt.Sprintf("svc-%05d", i), AllocID: alloc, ServiceName: "s"})
	}
	// a2 goes away before anything was sent: its upserts are dropped.
	r.deregisterAlloc("a2")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "everything sent", func() bool { return r.pending() == 0 })

	ups := srv.serviceUpdates()
	if len(ups) == 0 || len(ups[0].DeleteAllocIDs) != 1 || ups[0].DeleteAllocIDs[0] != "a2" || len(ups[0].Upsert) != 0 {
		t.Fatalf("first request %+v, want the deletion of a2 alone", ups[0])
	}
	total := 0
	for _, u := range ups {
		if len(u.Upsert) > structs.MaxRegistrationsPerRequest {
			t.Errorf("request of %d upserts, over %d", len(u.Upsert), structs.MaxRegistrationsPerRequest)
		}
		if u.NodeID != "node-1" || u.SecretID != "secret" {
			t.Errorf("request for node %q/%q", u.NodeID, u.SecretID)
		}
		for _, s := range u.Upsert {
			if s.AllocID != "a1" {
				t.Errorf("upsert of %s (alloc %s) after its alloc was deregistered", s.ID, s.AllocID)
			}
		}
		total += len(u.Upsert)
	}
	if want := (n + 1) / 2; total != want {
		t.Errorf("%d upserts sent, want %d", total, want)
	}
	// A task service gone: the alloc is deleted, then its rest upserted.
	r.replaceAlloc("a1", []*structs.ServiceRegistration{{ID: "svc-keep", AllocID: "a1"}})
	waitFor(t, "replacement sent", func() bool { return r.pending() == 0 })
	regs := srv.serviceRegs()
	if len(regs) != 1 || regs["svc-keep"] == nil {
		t.Fatalf("registrations after replace: %v, want svc-keep alone", slices.Collect(mapsKeys(regs)))
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
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
			t.Errorf("no registration %s; have %v", id, slices.Collect(mapsKeys(regs)))
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
	waitFor(t, "http warning", func() bool { return checkStatusOf(srv, id, "http") == CheckWarning })
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

// A script check of a task whose driver cannot run commands in it is
// critical with the reason; its output is bounded.
func TestScriptCheckWithoutExec(t *testing.T) {
	tr := &taskRunner{task: &structs.Task{Name: "t", Driver: "docker"}}
	o := runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "script", Command: "true"}, execIn: tr})
	if o.health != checkCritical || !strings.Contains(o.output, `"docker" cannot run commands`) {
		t.Fatalf("outcome %+v, want critical naming the driver", o)
	}
	raw := &taskRunner{task: &structs.Task{Name: "t", Driver: rawExecDriver}, execEnv: map[string]string{"PATH": os.Getenv("PATH")}, execDir: t.TempDir()}
	o = runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "script", Command: "/bin/sh",
		Args: []string{"-c", "head -c 100000 /dev/zero | tr '\\0' x; exit 1"}, Timeout: 10 * time.Second}, execIn: raw})
	if o.health != checkWarning || len(o.output) != structs.MaxCheckOutputBytes {
		t.Fatalf("outcome %v with %d bytes of output, want warning with %d", o.health, len(o.output), structs.MaxCheckOutputBytes)
	}
	start := time.Now()
	o = runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "script", Command: "/bin/sleep",
		Args: []string{"60"}, Timeout: 200 * time.Millisecond}, execIn: raw})
	if o.health != checkCritical || !strings.Contains(o.output, "timed out") || time.Since(start) > 10*time.Second {
		t.Fatalf("outcome %+v after %s, want critical timed out", o, time.Since(start))
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

func TestDecideChecksHealth(t *testing.T) {
	start := time.Unix(1000, 0)
	u := &structs.UpdateStrategy{MinHealthyTime: 10 * time.Second, HealthyDeadline: time.Minute}
	tests := []struct {
		name      string
		since, at time.Duration // since < 0: not passing
		want      healthVerdict
		next      time.Duration // -1: none
	}{
		{"not passing", -1, 5 * time.Second, healthPending, time.Minute},
		{"passing, not long enough", 2 * time.Second, 5 * time.Second, healthPending, 12 * time.Second},
		{"passing long enough", 2 * time.Second, 12 * time.Second, healthHealthy, -1},
		{"passing before tracking counts from its start", -30 * time.Second, 10 * time.Second, healthHealthy, -1},
		{"deadline passes", -1, time.Minute, healthUnhealthy, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var since time.Time
			if tt.since >= 0 || tt.since < -time.Second {
				since = start.Add(tt.since)
			}
			got, next := decideChecksHealth(u, start, since, start.Add(tt.at))
			if got != tt.want {
				t.Errorf("verdict %d, want %d", got, tt.want)
			}
			if tt.next < 0 && !next.IsZero() || tt.next >= 0 && !next.Equal(start.Add(tt.next)) {
				t.Errorf("next %v, want %v", next.Sub(start), tt.next)
			}
		})
	}
}

func TestCheckRestartCounting(t *testing.T) {
	start := time.Unix(1000, 0)
	fail, warn, pass := checkOutcome{health: checkCritical}, checkOutcome{health: checkWarning}, checkOutcome{health: checkPassing}
	tests := []struct {
		name string
		cr   *structs.CheckRestart
		runs []checkOutcome
		at   time.Duration // after the task's start
		want []bool
	}{
		{"no check_restart", nil, []checkOutcome{fail, fail}, time.Minute, []bool{false, false}},
		{"limit reached", &structs.CheckRestart{Limit: 2}, []checkOutcome{fail, fail, fail, fail}, time.Minute, []bool{false, true, false, true}},
		{"a pass resets", &structs.CheckRestart{Limit: 2}, []checkOutcome{fail, pass, fail, fail}, time.Minute, []bool{false, false, false, true}},
		{"warnings count", &structs.CheckRestart{Limit: 1}, []checkOutcome{warn}, time.Minute, []bool{true}},
		{"ignore_warnings", &structs.CheckRestart{Limit: 1, IgnoreWarnings: true}, []checkOutcome{warn}, time.Minute, []bool{false}},
		{"grace", &structs.CheckRestart{Limit: 1, Grace: 2 * time.Minute}, []checkOutcome{fail}, time.Minute, []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &checkState{spec: &checkSpec{check: &structs.ServiceCheck{CheckRestart: tt.cr}}}
			for i, o := range tt.runs {
				if got := st.wantsRestart(o, start, start.Add(tt.at)); got != tt.want[i] {
					t.Errorf("run %d: restart %v, want %v", i+1, got, tt.want[i])
				}
			}
		})
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
	const groupDelay, taskDelay = 1500 * time.Millisecond, 1000 * time.Millisecond
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

// A registration the servers refuse for its content is dropped alone; the
// node's other registrations still go through.
func TestServiceRegistrarDropsRefused(t *testing.T) {
	srv := newFakeServer()
	send := func(ctx context.Context, args *structs.ServiceRegistrationNodeArgs) error {
		for i, r := range args.Upsert {
			if r.ServiceName == "bad" {
				return structs.NewError(structs.ErrInvalid, "Upsert[%d]: ServiceName is bad", i)
			}
		}
		return srv.UpdateServices(ctx, args)
	}
	r := newServiceRegistrar(send, "node-1", "secret", backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}, hclog.NewNullLogger())
	r.upsert(&structs.ServiceRegistration{ID: "a", AllocID: "a1", ServiceName: "good"},
		&structs.ServiceRegistration{ID: "b", AllocID: "a1", ServiceName: "bad"},
		&structs.ServiceRegistration{ID: "c", AllocID: "a2", ServiceName: "good"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "queue empty", func() bool { return r.pending() == 0 })
	regs := srv.serviceRegs()
	if len(regs) != 2 || regs["a"] == nil || regs["c"] == nil {
		t.Fatalf("registered %v, want a and c", slices.Collect(mapsKeys(regs)))
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

func TestHTTPCheckTLSAndRequest(t *testing.T) {
	var got atomic.Value
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64)
		n, _ := r.Body.Read(b)
		got.Store(fmt.Sprintf("%s %s host=%s body=%s", r.Method, r.URL.Path, r.Host, b[:n]))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer s.Close()
	addr := s.Listener.Addr().String()
	tests := []struct {
		name  string
		check structs.ServiceCheck
		want  checkHealth
	}{
		{"unknown certificate", structs.ServiceCheck{Type: "http", Protocol: "https", Path: "/x"}, checkCritical},
		{"tls_skip_verify", structs.ServiceCheck{Type: "http", Protocol: "https", Path: "/x", TLSSkipVerify: true}, checkPassing},
		{"plain http to a TLS port", structs.ServiceCheck{Type: "http", Path: "/x"}, checkCritical},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check.Timeout = 5 * time.Second
			o := runCheck(context.Background(), &checkSpec{check: &tt.check, addr: addr})
			if o.health != tt.want {
				t.Fatalf("health %d (%s), want %d", o.health, o.output, tt.want)
			}
		})
	}
	ck := &structs.ServiceCheck{Type: "http", Protocol: "https", Path: "/p", Method: "PUT", Body: "hello", TLSSkipVerify: true,
		TLSServerName: "example.com", Header: map[string][]string{"Host": {"svc.example"}}, Timeout: 5 * time.Second}
	if o := runCheck(context.Background(), &checkSpec{check: ck, addr: addr}); o.health != checkPassing || o.code != 204 {
		t.Fatalf("outcome %+v", o)
	}
	if g := got.Load(); g != "PUT /p host=svc.example body=hello" {
		t.Fatalf("server saw %q", g)
	}
	// A check that outlives its timeout is critical.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer slow.Close()
	o := runCheck(context.Background(), &checkSpec{check: &structs.ServiceCheck{Type: "http", Path: "/", Timeout: 100 * time.Millisecond}, addr: slow.Listener.Addr().String()})
	if o.health != checkCritical {
		t.Fatalf("slow check %+v, want critical", o)
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
	if n := c.services.pending(); n != 0 || len(srv.serviceUpdates()) != 0 {
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
	if st := srv.clientStatus("td-1"); st != structs.AllocClientStatusRunning {
		t.Fatalf("alloc %s, want running", st)
	}
}

// Package pythononeshot tests the Python scheduler plugin in this
// directory (plugin.py) as the agent runs it: a process started with
// go-plugin's client, over its unix socket. It holds no Go code of its own.
package pythononeshot

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/internal/testwait"
	sdkbase "github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/base/basetest"
	"github.com/drover-org/drover/sdk/proto/basepb"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
	"github.com/drover-org/drover/sdk/scheduler/nodesched"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// python is the interpreter plugin.py's shebang names: Debian's, which
// python3-grpcio and python3-protobuf install into.
const python = "/usr/bin/python3"

// jobType is the job type the plugin serves.
const jobType = "python-oneshot"

// pluginPath returns plugin.py's absolute path, skipping the test when
// the plugin cannot run here.
func pluginPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the Python plugin as a process (full tier: go test without -short)")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s (the plugin's interpreter): %v", python, err)
	}
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Skipf("%s lacks the grpc or protobuf module (apt-get install python3-grpcio python3-protobuf): %v\n%s", python, err, out)
	}
	p, err := filepath.Abs("plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The plugin keeps every rule the core relies on for a scheduler plugin,
// driven over its real socket, plus the rule of its own type: a completed
// allocation is never placed again, not even for a new version of the job.
func TestConformance(t *testing.T) {
	proc := conformance.Start(t, exec.Command(pluginPath(t)))
	s := proc.Scheduler
	// The config half of the kit: the schema round trip (defaults,
	// a wrong type, an unknown field) over the same socket.
	basetest.CheckConfig(t, sdkbase.NewClient(proc.Conn))
	conformance.Run(t, s, conformance.Options{
		InProcess: true, // it is already across a real socket
		Scenarios: []conformance.Scenario{{
			Name: "completed-stays-done",
			Request: func(tg conformance.Target) *schedulerpb.ScheduleRequest {
				return tg.Cluster().
					Alloc("web", "node-1", 0, conformance.ClientStatus("complete")).
					Alloc("web", "node-2", 1, conformance.ClientStatus("complete")).
					NewVersion(conformance.DestructiveChange).
					Request()
			},
			Expect: func(_ conformance.Target, _ *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
				var out []string
				for _, pa := range resp.GetPlan().GetNodeAllocation() {
					if pa.GetTaskGroup() == "web" {
						out = append(out, fmt.Sprintf("%s was placed again; a completed oneshot allocation is done for good", pa.GetName()))
					}
				}
				return out
			},
		}},
	})
}

// logTB is the test as conformance.Start sees it, keeping every line
// logged through it: go-plugin's own and the plugin's stderr.
type logTB struct {
	*testing.T
	mu    sync.Mutex
	lines []string
}

func (l *logTB) Logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	l.T.Log(line)
}

func (l *logTB) logged() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// start runs the plugin in a test of its own, so the caller can assert on
// what happened when that test's cleanup killed it.
func start(t *testing.T, body func(t *testing.T, log *logTB, p *conformance.Process, cmd *exec.Cmd)) *logTB {
	t.Helper()
	bin := pluginPath(t)
	var log *logTB
	t.Run("running", func(t *testing.T) {
		log = &logTB{T: t}
		cmd := exec.Command(bin)
		body(t, log, conformance.Start(log, cmd), cmd)
	})
	return log
}

// warnings returns the lines logged at warn or error.
func warnings(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "[WARN]") || strings.Contains(l, "[ERROR]") {
			out = append(out, l)
		}
	}
	return out
}

// Everything go-plugin's host does with a plugin besides the scheduler
// service: the health check, the base service's config, the plugin's log
// lines on stderr parsed as hclog's, and a kill that is a clean exit
// within go-plugin's two-second grace, with the socket removed, and no
// warning or error logged from launch to exit.
func TestLifecycle(t *testing.T) {
	var (
		socket string
		cmd    *exec.Cmd
		killed time.Duration
	)
	log := start(t, func(t *testing.T, log *logTB, p *conformance.Process, c *exec.Cmd) {
		cmd = c
		socket = p.Client.ReattachConfig().Addr.String()
		if _, err := os.Stat(socket); err != nil {
			t.Errorf("the plugin's socket: %v", err)
		}

		health := grpc_health_v1.NewHealthClient(p.Conn)
		resp, err := health.Check(t.Context(), &grpc_health_v1.HealthCheckRequest{Service: "plugin"})
		if err != nil || resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Errorf(`health of service "plugin" = %v, %v; want SERVING`, resp, err)
		}
		if _, err := health.Check(t.Context(), &grpc_health_v1.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
			t.Errorf(`health of an unknown service: %v; want NotFound`, err)
		}

		testBaseConfig(t, basepb.NewBaseClient(p.Conn), p)

		// Kill is go-plugin's: Shutdown, then up to two seconds for the
		// process to exit before SIGKILL.
		t.Cleanup(func() {
			start := time.Now()
			p.Client.Kill()
			killed = time.Since(start)
		})
	})

	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("the plugin ended %v after Kill; want exit status 0 (Shutdown is a clean exit)", cmd.ProcessState)
	}
	if killed >= 2*time.Second {
		t.Errorf("Kill took %s: the plugin did not exit on Shutdown within go-plugin's grace", killed)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s after exit: %v; want it removed", socket, err)
	}
	lines := log.logged()
	if w := warnings(lines); len(w) > 0 {
		t.Errorf("go-plugin logged warnings or errors from launch to exit:\n%s", strings.Join(w, "\n"))
	}
	// hclog JSON on stderr arrives as a structured line at its level.
	var serving, exited bool
	for _, l := range lines {
		serving = serving || strings.Contains(l, "[INFO]") && strings.Contains(l, ": serving:") && strings.Contains(l, "job_type="+jobType)
		exited = exited || strings.Contains(l, "[INFO]") && strings.Contains(l, ": plugin exited")
	}
	if !serving || !exited {
		t.Errorf("the plugin's log lines (serving %v, exited %v) did not arrive as structured info lines:\n%s", serving, exited, strings.Join(lines, "\n"))
	}
}

// testBaseConfig checks the plugin's config block: its schema, a refused
// value named by its field, and an accepted value that changes placement.
func testBaseConfig(t *testing.T, base basepb.BaseClient, p *conformance.Process) {
	t.Helper()
	schema, err := base.ConfigSchema(t.Context(), &basepb.ConfigSchemaRequest{})
	if err != nil {
		t.Fatalf("ConfigSchema: %v", err)
	}
	attrs := schema.GetSpec().GetAttributes()
	if len(attrs) != 1 || attrs[0].GetName() != "max_allocs_per_node" || attrs[0].GetType() != "number" || attrs[0].GetDefaultJson() != "0" {
		t.Errorf("ConfigSchema = %v; want one number attribute max_allocs_per_node, default 0", schema)
	}
	// The agent's half: the schema is one it can decode against, and what
	// it decodes from a config block (or from none) the plugin accepts.
	if err := sdkbase.CheckSpec(schema.GetSpec()); err != nil {
		t.Errorf("the agent refuses the plugin's schema: %v", err)
	}
	for _, block := range []string{"", "max_allocs_per_node = 3\n"} {
		f, diags := hclsyntax.ParseConfig([]byte(block), "agent.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		config, diags := sdkbase.Decode(schema.GetSpec(), f.Body)
		if diags.HasErrors() {
			t.Fatalf("decoding config block %q: %v", block, diags)
		}
		resp, err := base.SetConfig(t.Context(), &basepb.SetConfigRequest{ConfigJson: config, PluginName: "test"})
		if err != nil || len(resp.GetFieldErrors()) > 0 {
			t.Errorf("SetConfig(%s), decoded from %q = %v, %v; want it accepted", config, block, resp, err)
		}
	}

	for _, tc := range []struct {
		config string
		path   string // of the field error; "" for none
	}{
		{`{"max_allocs_per_node": -1}`, "max_allocs_per_node"},
		{`{"max_allocs_per_node": 1.5}`, "max_allocs_per_node"},
		{`{"max_allocs_per_node": "two"}`, "max_allocs_per_node"},
		{`{"max_allocs_per_node": 1e400}`, "max_allocs_per_node"},
		{`{"max_allocs_per_node": true}`, "max_allocs_per_node"},
		{`[]`, ""},
	} {
		resp, err := base.SetConfig(t.Context(), &basepb.SetConfigRequest{ConfigJson: []byte(tc.config), PluginName: "test"})
		if err != nil || len(resp.GetFieldErrors()) != 1 || resp.GetFieldErrors()[0].GetPath() != tc.path || resp.GetFieldErrors()[0].GetMessage() == "" {
			t.Errorf("SetConfig(%s) = %v, %v; want one field error at %q", tc.config, resp, err, tc.path)
		}
	}

	// Two allocations of one group, one node: both go there under the
	// cap of 3 decoded above (the refused configs changed nothing), one
	// with max_allocs_per_node = 1, both again once it is unset.
	req := conformance.NewBuilder(jobType).Nodes(1).Group("web", 2).Request()
	for _, tc := range []struct {
		config         string
		placed, failed int
	}{
		{"", 2, 0},
		{`{"max_allocs_per_node": 1}`, 1, 1},
		{`{"max_allocs_per_node": null}`, 2, 0},
	} {
		if tc.config != "" {
			resp, err := base.SetConfig(t.Context(), &basepb.SetConfigRequest{ConfigJson: []byte(tc.config), PluginName: "test"})
			if err != nil || len(resp.GetFieldErrors()) > 0 {
				t.Fatalf("SetConfig(%s) = %v, %v; want it accepted", tc.config, resp, err)
			}
		}
		resp, err := p.Scheduler.Schedule(t.Context(), req)
		if err != nil {
			t.Fatalf("Schedule: %v", err)
		}
		failed := 1 + int(resp.GetFailedTgAllocs()["web"].GetCoalescedFailures())
		if resp.GetFailedTgAllocs()["web"] == nil {
			failed = 0
		}
		if got := len(resp.GetPlan().GetNodeAllocation()); got != tc.placed || failed != tc.failed {
			t.Errorf("config %q: placed %d, failed %d; want %d, %d: %v", tc.config, got, failed, tc.placed, tc.failed, resp)
		}
	}
}

// SIGTERM stops the plugin as Shutdown does: exit status 0, socket gone.
func TestSIGTERM(t *testing.T) {
	var socket string
	var cmd *exec.Cmd
	start(t, func(t *testing.T, _ *logTB, p *conformance.Process, c *exec.Cmd) {
		cmd, socket = c, p.Client.ReattachConfig().Addr.String()
		if err := c.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, 10*time.Second, "the plugin to exit on SIGTERM", p.Client.Exited)
	})
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("the plugin ended %v on SIGTERM; want exit status 0", cmd.ProcessState)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s after SIGTERM: %v; want it removed", socket, err)
	}
}

// Run by hand, without the agent's magic cookie, the plugin refuses.
func TestRefusesWithoutCookie(t *testing.T) {
	cmd := exec.Command(pluginPath(t))
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || len(out) != 0 ||
		!strings.Contains(string(exit.Stderr), "is a drover plugin") {
		t.Errorf("plugin run by hand: %v, stdout %q, stderr %q; want exit status 1, no handshake, and a message", err, out, exit.Stderr)
	}
}

// outcome is what a plan does, in words a case compares.
type outcome struct {
	placed  []string // "name@node<-previous" of each new allocation
	stopped []string // "alloc-id:description[:client status]"
	failed  map[string]*schedulerpb.AllocMetric
	queued  map[string]int32
}

func read(resp *schedulerpb.ScheduleResponse) outcome {
	o := outcome{failed: resp.GetFailedTgAllocs(), queued: resp.GetQueuedAllocations()}
	for _, p := range resp.GetPlan().GetNodeAllocation() {
		s := p.GetName() + "@" + p.GetNodeId()
		if p.GetPreviousAllocation() != "" {
			s += "<-" + p.GetPreviousAllocation()
		}
		o.placed = append(o.placed, s)
	}
	for _, u := range resp.GetPlan().GetNodeUpdate() {
		s := u.GetAllocId() + ":" + u.GetDesiredDescription()
		if u.GetClientStatus() != "" {
			s += ":" + u.GetClientStatus()
		}
		o.stopped = append(o.stopped, s)
	}
	return o
}

// The plugin's rules, slot by slot, and its feasibility checks, each case
// a request built with the kit's builder and sent over the socket to one
// plugin process. Nodes are ranked by a hash of the eval and node IDs, so
// cases that place on a node of several say only where not to.
func TestSchedule(t *testing.T) {
	s := conformance.Launch(t, exec.Command(pluginPath(t)))
	const (
		web0, web1 = conformance.JobID + ".web[0]", conformance.JobID + ".web[1]"
	)
	cluster := func() *conformance.Builder {
		return conformance.NewBuilder(jobType).Nodes(2).Group("web", 2)
	}
	for _, tc := range []struct {
		name  string
		req   *schedulerpb.ScheduleRequest
		check func(t *testing.T, o outcome, resp *schedulerpb.ScheduleResponse)
	}{{
		name: "new job: each slot placed once, on its own node, under the SDK's derived ID",
		req:  cluster().Request(),
		check: func(t *testing.T, o outcome, resp *schedulerpb.ScheduleResponse) {
			if len(o.placed) != 2 || o.placed[0][:len(web0)] != web0 || o.placed[1][:len(web1)] != web1 ||
				resp.GetPlan().GetNodeAllocation()[0].GetNodeId() == resp.GetPlan().GetNodeAllocation()[1].GetNodeId() {
				t.Errorf("placed %v; want web[0] and web[1] on different nodes", o.placed)
			}
			for _, p := range resp.GetPlan().GetNodeAllocation() {
				if want := nodesched.AllocID(conformance.EvalID, 1, p.GetNodeId(), p.GetName()); p.GetId() != want {
					t.Errorf("%s has ID %s; want %s, as sdk/scheduler/derivedid derives it", p.GetName(), p.GetId(), want)
				}
			}
			if o.queued["web"] != 2 {
				t.Errorf("queued %v; want web 2 (the core counts placements down)", o.queued)
			}
		},
	}, {
		name: "a completed allocation is done: only the other slot is placed",
		req:  cluster().Alloc("web", "node-1", 0, conformance.ClientStatus("complete")).Request(),
		check: func(t *testing.T, o outcome, resp *schedulerpb.ScheduleResponse) {
			if len(o.placed) != 1 || !strings.HasPrefix(o.placed[0], web1+"@") || len(o.stopped) != 0 {
				t.Errorf("placed %v, stopped %v; want only web[1] placed", o.placed, o.stopped)
			}
			if d := resp.GetPlan().GetDesiredTgUpdates()["web"]; d.GetIgnore() != 1 || d.GetPlace() != 1 {
				t.Errorf("desired updates %v; want 1 ignored, 1 placed", d)
			}
		},
	}, {
		name: "a failed allocation of this version is not replaced",
		req:  cluster().Alloc("web", "node-1", 0, conformance.ClientStatus("failed")).Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if len(o.placed) != 1 || !strings.HasPrefix(o.placed[0], web1+"@") {
				t.Errorf("placed %v; want only web[1]", o.placed)
			}
		},
	}, {
		name: "a failed allocation of an older version is tried again",
		req:  cluster().Alloc("web", "node-1", 0, conformance.ClientStatus("failed")).NewVersion(conformance.DestructiveChange).Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if len(o.placed) != 2 || !strings.HasSuffix(o.placed[0], "<-alloc-1") || len(o.stopped) != 0 {
				t.Errorf("placed %v, stopped %v; want web[0] replacing alloc-1, and web[1]", o.placed, o.stopped)
			}
		},
	}, {
		name: "a down node's allocation is lost and placed elsewhere",
		req: cluster().Alloc("web", "node-1", 0).Alloc("web", "node-2", 1).
			Node("node-1", conformance.Down()).Trigger("node-update", "node-1").Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if want := []string{"alloc-1:alloc is lost since its node is down:lost"}; !slices.Equal(o.stopped, want) {
				t.Errorf("stopped %v; want %v", o.stopped, want)
			}
			if want := []string{web0 + "@node-2<-alloc-1"}; !slices.Equal(o.placed, want) {
				t.Errorf("placed %v; want %v", o.placed, want)
			}
		},
	}, {
		name: "an allocation marked for migration is stopped and placed again",
		req:  cluster().Alloc("web", "node-1", 0, conformance.Migrate()).Alloc("web", "node-2", 1).Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if want := []string{"alloc-1:alloc is being migrated"}; !slices.Equal(o.stopped, want) || len(o.placed) != 1 || !strings.HasSuffix(o.placed[0], "<-alloc-1") {
				t.Errorf("stopped %v, placed %v; want alloc-1 migrated and replaced", o.stopped, o.placed)
			}
		},
	}, {
		name: "a lowered count stops the slots past it",
		req: cluster().Alloc("web", "node-1", 0).Alloc("web", "node-2", 1).Edit(func(r *schedulerpb.ScheduleRequest) {
			r.Job.TaskGroups[0].Count = 1
		}).Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if want := []string{"alloc-2:alloc not needed due to job update"}; !slices.Equal(o.stopped, want) || len(o.placed) != 0 {
				t.Errorf("stopped %v, placed %v; want alloc-2 stopped, nothing placed", o.stopped, o.placed)
			}
		},
	}, {
		name: "a stopped job stops everything and places nothing",
		req:  cluster().Alloc("web", "node-1", 0).Stop().Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if want := []string{"alloc-1:alloc not needed due to job stop"}; !slices.Equal(o.stopped, want) || len(o.placed) != 0 {
				t.Errorf("stopped %v, placed %v; want alloc-1 stopped, nothing placed", o.stopped, o.placed)
			}
		},
	}, {
		name: "max_placements: one placed, both queued",
		req:  cluster().MaxPlacements(1).Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if len(o.placed) != 1 || o.queued["web"] != 2 {
				t.Errorf("placed %v, queued %v; want 1 placed, web 2 queued", o.placed, o.queued)
			}
		},
	}, {
		name: "a constraint on node meta places only on the node that has it",
		req: cluster().Edit(func(r *schedulerpb.ScheduleRequest) {
			r.Nodes[1].Meta = map[string]string{"rack": "r2"}
			r.Job.Constraints = []*schedulerpb.Constraint{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r2"}}
		}).Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			if want := []string{web0 + "@node-2", web1 + "@node-2"}; !slices.Equal(o.placed, want) {
				t.Errorf("placed %v; want %v", o.placed, want)
			}
		},
	}, {
		name: "distinct_hosts: one allocation per node, the rest failed with a blocked eval",
		req: cluster().Group("web", 3).Edit(func(r *schedulerpb.ScheduleRequest) {
			r.Job.Constraints = []*schedulerpb.Constraint{{Operand: "distinct_hosts", RTarget: "true"}}
		}).Request(),
		check: func(t *testing.T, o outcome, resp *schedulerpb.ScheduleResponse) {
			m := o.failed["web"]
			if len(o.placed) != 2 || m.GetDimensionExhausted()["distinct_hosts"] != 2 || len(resp.GetBlockedEvals()) != 1 {
				t.Errorf("placed %v, failed %v, blocked %v; want 2 placed and web[2] failed on distinct_hosts", o.placed, m, resp.GetBlockedEvals())
			}
		},
	}, {
		name: "a missing driver filters every node, named in the metric",
		req: cluster().Edit(func(r *schedulerpb.ScheduleRequest) {
			r.Job.TaskGroups[0].Tasks[0].Driver = "docker"
		}).Request(),
		check: func(t *testing.T, o outcome, _ *schedulerpb.ScheduleResponse) {
			m := o.failed["web"]
			if len(o.placed) != 0 || m.GetNodesFiltered() != 2 || m.GetConstraintFiltered()["missing drivers"] != 2 || m.GetCoalescedFailures() != 1 {
				t.Errorf("placed %v, failed %v; want nothing placed, 2 nodes filtered for missing drivers, 1 coalesced failure", o.placed, m)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.Schedule(t.Context(), tc.req)
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
			tc.check(t, read(resp), resp)
		})
	}
}

// BenchmarkSchedule times one Schedule call of a new job over the socket,
// request and response marshalled by both sides, on clusters of a size.
//
//	go test -run '^$' -bench Schedule -benchtime 20x ./examples/plugins/python-oneshot/
func BenchmarkSchedule(b *testing.B) {
	if _, err := os.Stat(python); err != nil {
		b.Skipf("no %s: %v", python, err)
	}
	bin, err := filepath.Abs("plugin.py")
	if err != nil {
		b.Fatal(err)
	}
	s := conformance.Launch(b, exec.Command(bin))
	for _, size := range []struct{ nodes, count int }{{10, 10}, {1000, 100}, {5000, 500}} {
		b.Run(fmt.Sprintf("nodes=%d,count=%d", size.nodes, size.count), func(b *testing.B) {
			req := conformance.NewBuilder(jobType).Nodes(size.nodes).Group("web", int32(size.count)).Request()
			for b.Loop() {
				resp, err := s.Schedule(b.Context(), req)
				if err != nil || len(resp.GetPlan().GetNodeAllocation()) != size.count {
					b.Fatalf("Schedule placed %d of %d: %v", len(resp.GetPlan().GetNodeAllocation()), size.count, err)
				}
			}
		})
	}
}

// Package conformance is the test kit every scheduler plugin runs from its
// own tests. It checks the parts of the Scheduler contract that hold
// whatever the placement logic: what a stopped or purged job, a lost node,
// a draining node, a removed task group or a new job version must lead to,
// and the invariants every plan keeps (placements only on schedulable nodes,
// for groups the job has, under fresh unique IDs and well-formed names,
// within the nodes' capacity, never touching another job's allocations, the
// same answer for the same request).
//
// A plugin's test is one line:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, myplugin.New(), conformance.Options{})
//	}
//
// The kit adapts to what Info declares for the job type under test
// (Options.JobType, by default the first type listed): a per_node type must
// place each group's count on every feasible node, as system and sysbatch
// do; any other type must place each group's count in total.
//
// Every failure names the rule it breaks, e.g.
//
//	rule stop: a stopped job keeps 3 allocations running (alloc-1, alloc-2, alloc-3); a stopped job must have every allocation stopped
//
// so a plugin that deliberately departs from one rule can skip it by name
// (Options.Skip) and keep the others. Authors add their own scenarios
// (Options.Scenarios), built with Builder; the invariants run on those too.
//
// What to declare: Info's JobTypeInfo needs only a name (and
// runs_to_completion for work that ends). Every field left unset has a
// working default in the core: the restart and reschedule policies take
// Nomad's batch defaults for a type that runs to completion and its service
// defaults otherwise, field by field, and `drover operator plugin status`
// shows the defaults in force. Declare default_restart and
// default_reschedule when your type needs others, refused_blocks for what
// your scheduler does not implement, and the eval_on_* triggers for the
// events your placement logic must see (docs/plugins.md lists them all).
//
// For scenario files with golden responses, see package golden.
package conformance

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
)

// Rules the kit checks. A Failure's Rule is one of these or the name of a
// scenario from Options.Scenarios.
const (
	// Info names the plugin and lists job types, each named once, with
	// max_attempts of at least 1.
	RuleInfo = "info"
	// Schedule answers a valid request with a response and no error, and
	// does not refuse the standard triggers.
	RuleResponse = "response"
	// The same request twice gives equal responses.
	RuleDeterminism = "determinism"
	// Schedule does not modify its request.
	RuleRequestUnchanged = "request-unchanged"

	// Scenarios.

	// A new job gets its placements on the feasible nodes.
	RuleRegister = "register"
	// A stopped job has every live allocation stopped and nothing placed.
	RuleStop = "stop"
	// A job that is gone (purged) has every live allocation stopped.
	RulePurge = "purge"
	// A down node's allocations are stopped (marked lost); a count-based
	// type replaces them elsewhere.
	RuleNodeDown = "node-down"
	// A draining node's allocations marked for migration are stopped and
	// replaced where the type's rules allow; nothing new goes to the node.
	RuleNodeDrain = "node-drain"
	// The allocations of a task group the job no longer has are stopped.
	RuleGroupRemoved = "group-removed"
	// A new job version updates every allocation in place or replaces it.
	RuleNewVersion = "new-version"
	// When no node has room, nothing is placed and the response reports
	// each group in failed_tg_allocs and asks for a blocked eval.
	RuleNoFeasibleNode = "no-feasible-node"
	// Nothing is preempted when the operator's configuration does not
	// allow it for the type.
	RuleNoPreemption = "no-preemption"
	// A type that declares a preemption switch preempts, with the switch
	// on, a job at least 10 priority points lower to place on a full
	// node: only that job's allocation, not one within 10 points.
	RulePreempts = "preempts"
	// A plan places no more than max_placements new allocations.
	RuleMaxPlacements = "max-placements"
	// A group asking for a static port is not placed on a node that
	// already holds it (node-1), and every placement's ports keep the
	// ports invariant.
	RulePortHeld = "port-held"

	// Invariants, checked on every response.

	// Placements only for task groups the job has.
	RuleKnownGroup = "known-group"
	// New allocations only on ready, eligible, non-draining nodes of the
	// request; an in-place update stays on its allocation's node.
	RuleFeasibleNode = "feasible-node"
	// New allocation IDs are non-empty, unique, and no existing
	// allocation's; an in-place update names a live allocation of the job.
	RuleAllocID = "alloc-id"
	// Names are "<job>.<group>[<index>]" with 0 ≤ index < count, and no
	// two live allocations share a name (on one node, for per-node types).
	RuleAllocName = "alloc-name"
	// Stops name only the job's own allocations; preemptions name only
	// allocations the nodes list as others, only when allowed, only of
	// jobs at least 10 priority points below the job's, each recorded
	// both in node_preemptions (with the preempting allocation, on its
	// node) and in that allocation's preempted_allocations.
	RuleOtherJobs = "other-jobs"
	// No node is over its capacity (CPU, memory) after the plan.
	RuleFits = "fits"
	// A new allocation holds exactly its group's ports (static ones at
	// their value, dynamic ones in the node's range), none of them held
	// on the node after the plan's stops, reserved there, or given to
	// another allocation of the plan; an in-place update keeps its ports.
	RulePorts = "ports"
	// Follow-up evals have distinct canonical UUIDs and a wait time; each
	// alloc follow-up marks a finished allocation of the job, once, with
	// one of them; a placement's previous_allocation is the job's.
	RuleFollowups = "followups"
)

// Failure is one broken rule.
type Failure struct {
	// Rule is the rule broken (a Rule constant or a custom scenario's name).
	Rule string
	// Scenario is the scenario whose response broke it ("" for Info).
	Scenario string
	// Message says what happened and what the rule wants.
	Message string
}

func (f Failure) String() string {
	if f.Scenario == "" || f.Scenario == f.Rule {
		return fmt.Sprintf("rule %s: %s", f.Rule, f.Message)
	}
	return fmt.Sprintf("rule %s (scenario %s): %s", f.Rule, f.Scenario, f.Message)
}

// Options tune a run.
type Options struct {
	// JobType is the type under test; by default the first type Info lists.
	JobType string
	// Skip names rules not to check: their scenarios do not run and their
	// failures are not reported. Use it for a documented, deliberate
	// departure, not to silence a bug.
	Skip []string
	// Scenarios are run after the kit's own, and their responses are held
	// to the same invariants.
	Scenarios []Scenario
	// InProcess makes Run call the scheduler directly. By default Run
	// serves it over in-memory gRPC (Connect), as the core calls it, so a
	// response that does not survive the wire fails too. Check always
	// calls it directly.
	InProcess bool
}

// Target is the job type under test, as Info declares it.
type Target struct {
	JobType string
	// Info is the type's declaration.
	Info *schedulerpb.JobTypeInfo
}

// PerNode reports whether the type places each group's count on every
// feasible node.
func (t Target) PerNode() bool { return t.Info.GetPerNode() }

// Count is the task group count the kit's scenarios use: 2, or the type's
// max_group_count when that is smaller.
func (t Target) Count() int32 {
	if m := t.Info.GetMaxGroupCount(); m > 0 && m < 2 {
		return m
	}
	return 2
}

// Cluster returns a builder for the kit's standard cluster: ready nodes
// node-1 to node-3, node-4 down, node-5 ineligible, node-6 draining, and a
// job with groups "web" and "db" of Count each.
func (t Target) Cluster() *Builder {
	return NewBuilder(t.JobType).
		Nodes(3).
		Node("node-4", Down()).
		Node("node-5", Ineligible()).
		Node("node-6", Draining()).
		Group("web", t.Count()).
		Group("db", t.Count())
}

// Scenario is one request and what its response must satisfy beyond the
// invariants.
type Scenario struct {
	// Name names the scenario and the rule Expect's violations break.
	Name string
	// Request builds the request.
	Request func(Target) *schedulerpb.ScheduleRequest
	// Expect returns each violation as a sentence that says what happened
	// and what the rule wants. Nil expects nothing beyond the invariants.
	Expect func(t Target, req *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string
}

// Run checks s (see Check) and reports every failure with t.Errorf. Unless
// opts.InProcess, s is served over in-memory gRPC first (Connect).
func Run(t TB, s scheduler.Scheduler, opts Options) {
	t.Helper()
	if !opts.InProcess {
		s = Connect(t, s)
	}
	for _, f := range Check(s, opts) {
		t.Errorf("%s", f)
	}
}

// Check runs Info, every scenario and every invariant against s, calling
// it directly, and returns the failures; none means s conforms.
func Check(s scheduler.Scheduler, opts Options) []Failure {
	ctx := context.Background()
	skip := func(rule string) bool { return slices.Contains(opts.Skip, rule) }
	var out []Failure
	add := func(fs ...Failure) {
		for _, f := range fs {
			if !skip(f.Rule) {
				out = append(out, f)
			}
		}
	}

	info, err := s.Info(ctx)
	if err != nil {
		add(Failure{Rule: RuleInfo, Message: fmt.Sprintf("Info returned %v; Info must answer", err)})
		return out
	}
	add(checkInfo(info)...)
	target, ok := pickType(info, opts.JobType)
	if !ok {
		add(Failure{Rule: RuleInfo, Message: fmt.Sprintf("Info lists no job type %q to test; set Options.JobType to a type Info lists", opts.JobType)})
		return out
	}

	for _, sc := range append(slices.Clone(scenarios), opts.Scenarios...) {
		if skip(sc.Name) {
			continue
		}
		add(runScenario(ctx, s, target, sc)...)
	}
	return out
}

func checkInfo(info *schedulerpb.InfoResponse) []Failure {
	var out []Failure
	fail := func(format string, args ...any) {
		out = append(out, Failure{Rule: RuleInfo, Message: fmt.Sprintf(format, args...)})
	}
	if info.GetName() == "" {
		fail("Info has an empty name; a plugin must name itself")
	}
	if len(info.GetJobTypes()) == 0 {
		fail("Info lists no job types; a plugin must serve at least one")
	}
	seen := map[string]bool{}
	for _, jt := range info.GetJobTypes() {
		typ := jt.GetName()
		switch {
		case typ == "":
			fail("Info lists a job type with an empty name; every type must be named")
		case seen[typ]:
			fail("Info lists job type %q twice; each type must be listed once", typ)
		}
		seen[typ] = true
		if jt.GetMaxAttempts() < 1 {
			fail("job type %q has max_attempts %d; it must be at least 1", typ, jt.GetMaxAttempts())
		}
	}
	return out
}

func pickType(info *schedulerpb.InfoResponse, name string) (Target, bool) {
	for _, jt := range info.GetJobTypes() {
		if name == "" || jt.GetName() == name {
			return Target{JobType: jt.GetName(), Info: jt}, jt.GetName() != ""
		}
	}
	return Target{}, false
}

// runScenario schedules the scenario's request twice and checks the
// answer against the scenario, the invariants and itself.
func runScenario(ctx context.Context, s scheduler.Scheduler, target Target, sc Scenario) []Failure {
	req := sc.Request(target)
	orig := proto.Clone(req).(*schedulerpb.ScheduleRequest)
	again := proto.Clone(req).(*schedulerpb.ScheduleRequest)
	fail := func(rule, format string, args ...any) Failure {
		return Failure{Rule: rule, Scenario: sc.Name, Message: fmt.Sprintf(format, args...)}
	}

	resp, err := s.Schedule(ctx, req)
	switch {
	case err != nil:
		return []Failure{fail(RuleResponse, "Schedule returned %v; a valid request must be answered with a response, not an error", err)}
	case resp == nil:
		return []Failure{fail(RuleResponse, "Schedule returned a nil response and no error; it must return a response")}
	}
	var out []Failure
	if !proto.Equal(req, orig) {
		out = append(out, fail(RuleRequestUnchanged, "Schedule modified its request; the request belongs to the caller"))
	}
	if resp.GetStatus() != "" {
		out = append(out, fail(RuleResponse, "Schedule answered status %q (%s) to a %s eval; a scheduler must handle the standard triggers",
			resp.GetStatus(), resp.GetStatusDescription(), req.GetEval().GetTriggeredBy()))
		return out
	}
	second, err := s.Schedule(ctx, again)
	if err != nil || !proto.Equal(resp, second) {
		out = append(out, fail(RuleDeterminism, "the same request answered twice gave different responses (%v, then %v, err %v); Schedule must be a function of its request",
			resp, second, err))
	}
	for _, f := range Invariants(target, orig, resp) {
		f.Scenario = sc.Name
		out = append(out, f)
	}
	if sc.Expect != nil {
		for _, msg := range sc.Expect(target, orig, resp) {
			out = append(out, fail(sc.Name, "%s", msg))
		}
	}
	return out
}

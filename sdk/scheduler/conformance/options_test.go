package conformance_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// recorder is a conformance.TB that keeps what Run reports.
type recorder struct {
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }
func (r *recorder) Cleanup(f func())               { r.cleanups = append(r.cleanups, f) }
func (r *recorder) close() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

func TestRunReportsEveryFailure(t *testing.T) {
	for _, inProcess := range []bool{true, false} {
		t.Run(fmt.Sprint("in process ", inProcess), func(t *testing.T) {
			rec := &recorder{}
			defer rec.close()
			conformance.Run(rec, empty{systemSched()}, conformance.Options{InProcess: inProcess})
			want := len(conformance.Check(empty{systemSched()}, conformance.Options{}))
			if len(rec.errs) != want || want == 0 {
				t.Fatalf("Run reported %d errors, want Check's %d:\n%s", len(rec.errs), want, strings.Join(rec.errs, "\n"))
			}
			if !strings.HasPrefix(rec.errs[0], "rule register: ") {
				t.Errorf("first error %q does not name its rule", rec.errs[0])
			}
		})
	}
}

func TestOptions(t *testing.T) {
	// A scenario of the author's own: a job pinned by a constraint to a
	// node attribute that only node-2 has.
	pinned := conformance.Scenario{
		Name: "pinned",
		Request: func(tg conformance.Target) *schedulerpb.ScheduleRequest {
			return tg.Cluster().Node("node-2", func(n *schedulerpb.Node) { n.Meta = map[string]string{"rack": "r2"} }).
				Edit(func(r *schedulerpb.ScheduleRequest) {
					r.Job.Constraints = []*schedulerpb.Constraint{{LTarget: "${meta.rack}", Operand: "=", RTarget: "r2"}}
				}).Request()
		},
		Expect: func(_ conformance.Target, _ *schedulerpb.ScheduleRequest, resp *schedulerpb.ScheduleResponse) []string {
			var out []string
			for _, p := range resp.GetPlan().GetNodeAllocation() {
				if p.GetNodeId() != "node-2" {
					out = append(out, fmt.Sprintf("placed %s on %s; only node-2 is in rack r2", p.GetId(), p.GetNodeId()))
				}
			}
			if len(resp.GetPlan().GetNodeAllocation()) == 0 {
				out = append(out, "placed nothing on node-2")
			}
			return out
		},
	}
	everything := []string{
		conformance.RuleGroupRemoved, conformance.RuleMaxPlacements, conformance.RuleNewVersion,
		conformance.RuleNoFeasibleNode, conformance.RuleNodeDown, conformance.RuleNodeDrain,
		conformance.RulePreempts, conformance.RulePurge, conformance.RuleRegister, conformance.RuleStop,
	}
	builtins := append(slices.Clone(everything), conformance.RuleOtherJobs)
	for _, tc := range []struct {
		name string
		s    scheduler.Scheduler
		opts conformance.Options
		want []string
	}{
		{"skip every rule empty breaks", empty{systemSched()}, conformance.Options{Skip: everything}, nil},
		{"skip one", ignoresStop{systemSched()}, conformance.Options{Skip: []string{conformance.RuleStop}}, nil},
		{"custom scenario passes", systemSched(), conformance.Options{Scenarios: []conformance.Scenario{pinned}}, nil},
		{"custom scenario fails", empty{systemSched()},
			conformance.Options{Skip: everything, Scenarios: []conformance.Scenario{pinned}}, []string{"pinned"}},
		{"invariants hold on a custom scenario", ghostGroup{systemSched()},
			conformance.Options{Skip: builtins, Scenarios: []conformance.Scenario{pinned}},
			[]string{conformance.RuleAllocID, conformance.RuleKnownGroup}},
		{"unknown job type", systemSched(), conformance.Options{JobType: "batch"}, []string{conformance.RuleInfo}},
		{"named job type", sysbatchSched(), conformance.Options{JobType: "sysbatch"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := conformance.Check(tc.s, tc.opts)
			if got := rules(fs); !slices.Equal(got, tc.want) {
				var all []string
				for _, f := range fs {
					all = append(all, f.String())
				}
				t.Errorf("broken rules = %q, want %q:\n%s", got, tc.want, strings.Join(all, "\n"))
			}
		})
	}
}

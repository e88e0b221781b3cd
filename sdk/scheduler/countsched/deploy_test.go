package countsched

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// withUpdate gives every group an update block.
func withUpdate(maxParallel, canary int32) func(*schedulerpb.Job) {
	return func(j *schedulerpb.Job) {
		conformance.DestructiveChange(j)
		for _, tg := range j.GetTaskGroups() {
			tg.UpdateMaxParallel = maxParallel
			tg.Update = &schedulerpb.UpdateStrategy{MaxParallel: maxParallel, Canary: canary}
		}
	}
}

var serviceLike = Config{Finished: func(*schedulerpb.Allocation, bool) Finish { return Reschedule }, PaceUpdates: true, PaceMigrations: true}

// The engine with Config.Deployments keeps the kit's rules, and a type
// without it never rolls out through deployments, whatever the job asks.
func TestDeployments(t *testing.T) {
	withDeployments := serviceLike
	withDeployments.Deployments = true
	conformance.Run(t, engine{withDeployments}, conformance.Options{})

	// Three allocs of version 0 on two nodes, version 1 changes them
	// destructively with update { max_parallel = 1, canary = 1 }.
	req := func(edit func(*schedulerpb.ScheduleRequest)) *schedulerpb.ScheduleRequest {
		b := conformance.NewBuilder("count").Node("n1").Node("n2").Group("web", 3).Running(false).NewVersion(withUpdate(1, 1))
		if edit != nil {
			b.Edit(edit)
		}
		return b.Request()
	}
	tests := []struct {
		name           string
		cfg            Config
		req            *schedulerpb.ScheduleRequest
		wantCanaries   int
		wantReplaced   int
		wantDeployment bool
	}{
		{name: "without deployments: paced by max_parallel, no canary", cfg: serviceLike, req: req(nil), wantReplaced: 1},
		{name: "with deployments: a canary, nothing replaced", cfg: withDeployments, req: req(nil), wantCanaries: 1, wantDeployment: true},
		{name: "with deployments, the group without an update block: as without", cfg: withDeployments,
			req: req(func(r *schedulerpb.ScheduleRequest) { r.Job.TaskGroups[0].Update = nil }), wantReplaced: 1},
		{name: "with deployments, max_parallel 0 (all at once): as without", cfg: withDeployments,
			req: req(func(r *schedulerpb.ScheduleRequest) {
				r.Job.TaskGroups[0].Update.MaxParallel, r.Job.TaskGroups[0].UpdateMaxParallel = 0, 0
			}), wantReplaced: 3},
		{name: "with deployments, the job stopped: everything stops, no deployment", cfg: withDeployments,
			req: req(func(r *schedulerpb.ScheduleRequest) { r.Job.Stop = true; r.Eval.TriggeredBy = "job-deregister" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := Schedule(tt.req, tt.cfg).Response
			canaries, replaced := 0, 0
			for _, p := range resp.GetPlan().GetNodeAllocation() {
				switch {
				case p.GetCanary():
					canaries++
					if p.GetPreviousAllocation() != "" {
						t.Errorf("canary %s replaces %s; a canary replaces nothing", p.GetName(), p.GetPreviousAllocation())
					}
				case p.GetPreviousAllocation() != "":
					replaced++
				}
			}
			if canaries != tt.wantCanaries || replaced != tt.wantReplaced {
				t.Errorf("canaries = %d, replaced = %d; want %d, %d", canaries, replaced, tt.wantCanaries, tt.wantReplaced)
			}
			if got := resp.GetPlan().GetCreateDeployment() != nil; got != tt.wantDeployment {
				t.Errorf("create_deployment = %v, want one: %v", resp.GetPlan().GetCreateDeployment(), tt.wantDeployment)
			}
			if tt.wantCanaries > 0 && len(resp.GetPlan().GetNodeUpdate()) != 0 {
				t.Errorf("placing canaries stopped %d allocs; want none", len(resp.GetPlan().GetNodeUpdate()))
			}
		})
	}
}

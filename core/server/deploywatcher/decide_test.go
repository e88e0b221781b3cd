package deploywatcher

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A failure reverts the job only when a group that failed asks for
// auto_revert, as Nomad does: for unhealthy allocations, their groups; for
// a missed progress deadline, every group not done yet. A finished or
// healthy group's auto_revert does not count.
func TestDecideRevertsForFailingGroupsOnly(t *testing.T) {
	job := &structs.Job{ID: "j", Version: 3, CreateIndex: 7}
	deploy := func(groups map[string]*structs.DeploymentState) *structs.Deployment {
		return &structs.Deployment{ID: "d", JobVersion: 3, JobCreateIndex: 7, Status: structs.DeploymentStatusRunning,
			TaskGroups: groups}
	}
	past, ahead := t0.Add(-time.Second), t0.Add(time.Hour)
	tests := []struct {
		name       string
		groups     map[string]*structs.DeploymentState
		wantDesc   string
		wantRevert bool
	}{
		{"unhealthy group reverts", map[string]*structs.DeploymentState{
			"web": {DesiredTotal: 2, UnhealthyAllocs: 1, AutoRevert: true},
			"api": {DesiredTotal: 1},
		}, structs.DeploymentStatusDescriptionFailedAllocations, true},
		{"healthy group's auto_revert does not count", map[string]*structs.DeploymentState{
			"web": {DesiredTotal: 2, UnhealthyAllocs: 1},
			"api": {DesiredTotal: 1, AutoRevert: true},
		}, structs.DeploymentStatusDescriptionFailedAllocations, false},
		{"one of two unhealthy groups reverts", map[string]*structs.DeploymentState{
			"web": {DesiredTotal: 2, UnhealthyAllocs: 1},
			"api": {DesiredTotal: 1, UnhealthyAllocs: 1, AutoRevert: true},
		}, structs.DeploymentStatusDescriptionFailedAllocations, true},
		{"timed-out group reverts", map[string]*structs.DeploymentState{
			"web": {DesiredTotal: 2, RequireProgressBy: past, AutoRevert: true},
			"api": {DesiredTotal: 1, RequireProgressBy: ahead},
		}, structs.DeploymentStatusDescriptionProgressDeadline, true},
		{"done group's auto_revert does not count", map[string]*structs.DeploymentState{
			"web": {DesiredTotal: 2, RequireProgressBy: past},
			"api": {DesiredTotal: 1, HealthyAllocs: 1, RequireProgressBy: past, AutoRevert: true},
		}, structs.DeploymentStatusDescriptionProgressDeadline, false},
		{"unfinished group still in time counts", map[string]*structs.DeploymentState{
			"web": {DesiredTotal: 2, RequireProgressBy: past},
			"api": {DesiredTotal: 1, RequireProgressBy: ahead, AutoRevert: true},
		}, structs.DeploymentStatusDescriptionProgressDeadline, true},
		{"canaries awaiting promotion do not count", map[string]*structs.DeploymentState{
			"web": {DesiredTotal: 2, RequireProgressBy: past},
			"api": {DesiredTotal: 2, DesiredCanaries: 1, PlacedCanaries: []string{"c"}, HealthyAllocs: 1, AutoRevert: true},
		}, structs.DeploymentStatusDescriptionProgressDeadline, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(deploy(tt.groups), job, t0, true)
			if got.Action != Fail || got.Description != tt.wantDesc || got.AutoRevert != tt.wantRevert {
				t.Errorf("Decide = %s %q revert=%v, want fail %q revert=%v",
					got.Action, got.Description, got.AutoRevert, tt.wantDesc, tt.wantRevert)
			}
		})
	}
}

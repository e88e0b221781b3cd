package structs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/pluginhost"
	"github.com/drover-org/drover/core/structs"
	sysbatch "github.com/drover-org/drover/plugins/scheduler-sysbatch"
	system "github.com/drover-org/drover/plugins/scheduler-system"
)

// TestValidateBuiltinDeclarations: with the declarations the built-in
// plugins make, a job is held to the rules system and sysbatch jobs have
// always had, and gets their restart defaults.
func TestValidateBuiltinDeclarations(t *testing.T) {
	decl := map[string]structs.JobTypeBehavior{
		"system":   pluginhost.Behavior(system.Declaration()),
		"sysbatch": pluginhost.Behavior(sysbatch.Declaration()),
	}
	tests := []struct {
		typ  string
		edit func(*structs.Job)
		want string // empty: accepted
	}{
		{"system", nil, ""},
		{"system", func(j *structs.Job) { j.TaskGroups[0].Count = 2 }, "count is 2, but system jobs run at most 1 allocation(s) of a group"},
		{"system", func(j *structs.Job) {
			j.Affinities = []*structs.Affinity{{LTarget: "a", RTarget: "b", Operand: "=", Weight: 50}}
		}, "system jobs may not have an affinity block"},
		{"system", func(j *structs.Job) { j.TaskGroups[0].Spreads = []*structs.Spread{{Attribute: "a"}} }, `group "g": system jobs may not have a spread block`},
		{"system", func(j *structs.Job) { j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 1} }, `group "g": system jobs should not have a reschedule policy`},
		// All zero, as Nomad writes it out: no block, accepted.
		{"system", func(j *structs.Job) { j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{} }, ""},
		{"system", func(j *structs.Job) { j.TaskGroups[0].Migrate = &structs.MigrateStrategy{} }, `group "g": migrate block not allowed for system jobs`},
		{"system", func(j *structs.Job) { j.Periodic = &structs.PeriodicConfig{Spec: "@hourly"} }, "periodic block: not allowed for system jobs"},
		{"system", func(j *structs.Job) { j.ParameterizedJob = &structs.ParameterizedJobConfig{} }, "parameterized block: not allowed for system jobs"},
		{"system", func(j *structs.Job) { d := time.Hour; j.TaskGroups[0].MaxRunDuration = &d }, "max_run_duration not allowed for system jobs"},
		{"system", func(j *structs.Job) { j.Update = &structs.UpdateStrategy{MaxParallel: 1} }, ""},
		{"sysbatch", nil, ""},
		{"sysbatch", func(j *structs.Job) { j.TaskGroups[0].Count = 5 }, ""},
		{"sysbatch", func(j *structs.Job) { j.Periodic = &structs.PeriodicConfig{Spec: "@hourly"} }, ""},
		{"sysbatch", func(j *structs.Job) { j.ParameterizedJob = &structs.ParameterizedJobConfig{} }, ""},
		{"sysbatch", func(j *structs.Job) { d := time.Hour; j.TaskGroups[0].MaxRunDuration = &d }, ""},
		{"sysbatch", func(j *structs.Job) {
			j.Affinities = []*structs.Affinity{{LTarget: "a", RTarget: "b", Operand: "=", Weight: 50}}
		}, ""},
		{"sysbatch", func(j *structs.Job) { j.Update = &structs.UpdateStrategy{Stagger: time.Second} }, "update block: not allowed for sysbatch jobs"},
		{"sysbatch", func(j *structs.Job) { j.Update = &structs.UpdateStrategy{} }, ""},
		{"sysbatch", func(j *structs.Job) { j.TaskGroups[0].Update = &structs.UpdateStrategy{MaxParallel: 1} }, `group "g": update block not allowed for sysbatch jobs`},
		{"sysbatch", func(j *structs.Job) { j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 1} }, `group "g": sysbatch jobs should not have a reschedule policy`},
		// All zero, as Nomad writes it out: no block, accepted.
		{"sysbatch", func(j *structs.Job) { j.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{} }, ""},
		{"sysbatch", func(j *structs.Job) { j.TaskGroups[0].Migrate = &structs.MigrateStrategy{} }, `group "g": migrate block not allowed for sysbatch jobs`},
	}
	for _, tc := range tests {
		b := decl[tc.typ]
		j := &structs.Job{ID: "j", Type: tc.typ, TypeBehavior: b.Copy(), TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}},
		}}}
		if tc.edit != nil {
			tc.edit(j)
		}
		j.Canonicalize()
		if got := j.TaskGroups[0].RestartPolicy; got == nil || *got != *b.DefaultRestart {
			t.Errorf("%s: restart policy = %+v, want the declared %+v", tc.typ, got, b.DefaultRestart)
		}
		err := j.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", tc.typ, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want it to contain %q", tc.typ, err, tc.want)
		}
	}
}

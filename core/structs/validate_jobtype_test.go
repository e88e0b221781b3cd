package structs

import (
	"strings"
	"testing"
	"time"
)

// typedJob is a one-group job of type typ declaring b, with a restart
// policy so that only the rule under test can fail.
func typedJob(typ string, b *JobTypeBehavior, edit func(*Job)) *Job {
	j := &Job{ID: "j", Type: typ, TypeBehavior: b, TaskGroups: []*TaskGroup{{
		Name: "g", Count: 1, Tasks: []*Task{{Name: "t", Driver: "raw_exec"}},
	}}}
	if b != nil && b.DefaultRestart == nil {
		j.TaskGroups[0].RestartPolicy = &RestartPolicy{Attempts: 1, Interval: time.Minute, Delay: time.Second, Mode: RestartPolicyModeFail}
	}
	if edit != nil {
		edit(j)
	}
	j.Canonicalize()
	return j
}

// TestValidateFollowsTypeDeclaration: every rule that depends on the job
// type is the declaration's, for types with no built-in name. A rule the
// declaration allows is accepted; one it refuses is refused naming the type
// and the block.
func TestValidateFollowsTypeDeclaration(t *testing.T) {
	oneshot := &JobTypeBehavior{RunsToCompletion: true, AllowPeriodic: true, EvalOnNodeJoin: true}
	plain := &JobTypeBehavior{}
	open := &JobTypeBehavior{AllowPeriodic: true, AllowParameterized: true, AllowMaxRunDuration: true, MaxGroupCount: 3}
	strict := &JobTypeBehavior{
		PerNode: true, MaxGroupCount: 1,
		RefusedBlocks: []string{BlockAffinity, BlockSpread, BlockUpdate, BlockReschedule, BlockMigrate},
	}
	periodic := func(j *Job) { j.Periodic = &PeriodicConfig{Enabled: true, Spec: "@hourly"} }
	param := func(j *Job) { j.ParameterizedJob = &ParameterizedJobConfig{} }
	maxRun := func(j *Job) { d := time.Hour; j.TaskGroups[0].MaxRunDuration = &d }
	count := func(n int) func(*Job) { return func(j *Job) { j.TaskGroups[0].Count = n } }
	jobAffinity := func(j *Job) { j.Affinities = []*Affinity{{LTarget: "a", RTarget: "b", Operand: "=", Weight: 50}} }
	jobSpread := func(j *Job) { j.Spreads = []*Spread{{Attribute: "a"}} }
	jobUpdate := func(j *Job) { j.Update = &UpdateStrategy{MaxParallel: 2} }
	emptyUpdate := func(j *Job) { j.Update = &UpdateStrategy{}; j.TaskGroups[0].Update = &UpdateStrategy{} }
	groupAffinity := func(j *Job) {
		j.TaskGroups[0].Affinities = []*Affinity{{LTarget: "a", RTarget: "b", Operand: "=", Weight: 50}}
	}
	groupSpread := func(j *Job) { j.TaskGroups[0].Spreads = []*Spread{{Attribute: "a"}} }
	groupUpdate := func(j *Job) { j.TaskGroups[0].Update = &UpdateStrategy{MaxParallel: 1} }
	reschedule := func(j *Job) { j.TaskGroups[0].ReschedulePolicy = &ReschedulePolicy{Attempts: 1} }
	migrate := func(j *Job) { j.TaskGroups[0].Migrate = &MigrateStrategy{} }
	all := func(j *Job) {
		for _, f := range []func(*Job){periodic, param, maxRun, count(5), jobAffinity, jobSpread, jobUpdate, groupAffinity, groupSpread, reschedule, migrate} {
			f(j)
		}
	}

	tests := []struct {
		name string
		typ  string
		b    *JobTypeBehavior
		edit func(*Job)
		want string // empty: accepted
	}{
		{"periodic allowed", "oneshot", oneshot, periodic, ""},
		{"periodic refused", "plain", plain, periodic, "periodic block: not allowed for plain jobs"},
		{"parameterized allowed", "open", open, param, ""},
		{"parameterized refused", "oneshot", oneshot, param, "parameterized block: not allowed for oneshot jobs"},
		{"max_run_duration allowed", "open", open, maxRun, ""},
		{"max_run_duration refused", "oneshot", oneshot, maxRun, `group "g": max_run_duration not allowed for oneshot jobs`},
		{"count at the limit", "open", open, count(3), ""},
		{"count over the limit", "open", open, count(4), `group "g": count is 4, but open jobs run at most 3 allocation(s) of a group (count must be between 0 and 3)`},
		{"count over a per-node limit of 1", "strict", strict, count(2), `group "g": count is 2, but strict jobs run at most 1 allocation(s) of a group per node (count must be 0 or 1)`},
		{"no count limit", "plain", plain, count(1000), ""},
		{"job affinity refused", "strict", strict, jobAffinity, "strict jobs may not have an affinity block"},
		{"job spread refused", "strict", strict, jobSpread, "strict jobs may not have a spread block"},
		{"job update refused", "strict", strict, jobUpdate, "update block: not allowed for strict jobs"},
		{"all-zero update blocks accepted where refused", "strict", strict, emptyUpdate, ""},
		{"group affinity refused", "strict", strict, groupAffinity, `group "g": strict jobs may not have an affinity block`},
		{"group spread refused", "strict", strict, groupSpread, `group "g": strict jobs may not have a spread block`},
		{"group update refused", "strict", strict, groupUpdate, `group "g": update block not allowed for strict jobs`},
		{"reschedule refused", "strict", strict, reschedule, `group "g": strict jobs should not have a reschedule policy`},
		{"migrate refused", "strict", strict, migrate, `group "g": migrate block not allowed for strict jobs`},
		{"blocks accepted where not refused", "plain", plain, func(j *Job) {
			for _, f := range []func(*Job){jobAffinity, jobSpread, jobUpdate, groupAffinity, groupSpread, groupUpdate, reschedule, migrate} {
				f(j)
			}
		}, ""},
		// Checked client-side, before the server stamped a declaration:
		// no type rule applies, whatever the type is called.
		{"no declaration: no type rule", "system", nil, all, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := typedJob(tc.typ, tc.b, tc.edit).Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestCanonicalizeTypeDefaults: a group that sets no restart or reschedule
// policy gets its type's declared default, a copy the job owns; without a
// declaration it stays unset until the server stamps one.
func TestCanonicalizeTypeDefaults(t *testing.T) {
	restart := &RestartPolicy{Attempts: 4, Interval: time.Hour, Delay: time.Second, Mode: RestartPolicyModeDelay}
	resched := &ReschedulePolicy{Attempts: 2, Interval: time.Hour, Delay: time.Minute, DelayFunction: "constant"}
	own := &RestartPolicy{Attempts: 1, Interval: time.Minute, Delay: time.Second, Mode: RestartPolicyModeFail}
	tests := []struct {
		name                string
		b                   *JobTypeBehavior
		set                 *RestartPolicy
		wantRestart         *RestartPolicy
		wantReschedule      *ReschedulePolicy
		wantMissingRestart  bool
		wantValidateSuccess bool
	}{
		{"declared defaults", &JobTypeBehavior{DefaultRestart: restart, DefaultReschedule: resched}, nil, restart, resched, false, true},
		{"the group's own restart wins", &JobTypeBehavior{DefaultRestart: restart}, own, own, nil, false, true},
		{"a refused reschedule block gets no default", &JobTypeBehavior{DefaultRestart: restart, DefaultReschedule: resched, RefusedBlocks: []string{BlockReschedule}}, nil, restart, nil, false, true},
		{"no declared restart: the job must set one", &JobTypeBehavior{}, nil, nil, nil, true, false},
		{"no declaration: left for the server", nil, nil, nil, nil, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Type: "made-up", TypeBehavior: tc.b, TaskGroups: []*TaskGroup{{
				Name: "g", Count: 1, RestartPolicy: tc.set, Tasks: []*Task{{Name: "t", Driver: "raw_exec"}},
			}}}
			j.Canonicalize()
			j.Canonicalize() // idempotent
			tg := j.TaskGroups[0]
			if !equalPtr(tg.RestartPolicy, tc.wantRestart) {
				t.Errorf("group restart = %+v, want %+v", tg.RestartPolicy, tc.wantRestart)
			}
			if !equalPtr(tg.Tasks[0].RestartPolicy, tc.wantRestart) {
				t.Errorf("task restart = %+v, want %+v", tg.Tasks[0].RestartPolicy, tc.wantRestart)
			}
			if !equalPtr(tg.ReschedulePolicy, tc.wantReschedule) {
				t.Errorf("group reschedule = %+v, want %+v", tg.ReschedulePolicy, tc.wantReschedule)
			}
			if tc.b != nil && tg.RestartPolicy != nil && (tg.RestartPolicy == tc.b.DefaultRestart || tg.Tasks[0].RestartPolicy == tg.RestartPolicy) {
				t.Error("the restart policy is shared, not copied")
			}
			if tc.b != nil && tg.ReschedulePolicy != nil && tg.ReschedulePolicy == tc.b.DefaultReschedule {
				t.Error("the reschedule policy is the declaration's, not a copy")
			}
			err := j.Validate()
			if tc.wantValidateSuccess != (err == nil) {
				t.Fatalf("Validate = %v, want success %v", err, tc.wantValidateSuccess)
			}
			if tc.wantMissingRestart && !strings.Contains(err.Error(), `group "g": missing restart policy (made-up jobs declare no default restart policy)`) {
				t.Errorf("Validate = %v, want the missing restart policy named", err)
			}
		})
	}
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestCanonicalizeJobUpdate: a group without an update block takes a copy
// of the job's (a job sent as JSON), keeps its own, and takes none when
// the type refuses the block or is not known yet.
func TestCanonicalizeJobUpdate(t *testing.T) {
	jobU := &UpdateStrategy{MaxParallel: 2, Canary: 1, HealthCheck: UpdateHealthCheckTaskStates}
	ownU := &UpdateStrategy{MaxParallel: 3}
	tests := []struct {
		name string
		b    *JobTypeBehavior
		own  *UpdateStrategy
		want *UpdateStrategy
	}{
		{"inherits the job's", &JobTypeBehavior{Deployments: true}, nil, jobU},
		{"keeps its own", &JobTypeBehavior{Deployments: true}, ownU, ownU},
		{"refused by the type", &JobTypeBehavior{RefusedBlocks: []string{BlockUpdate}}, nil, nil},
		{"type not known yet", nil, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Type: "made-up", TypeBehavior: tc.b, Update: jobU, TaskGroups: []*TaskGroup{{
				Name: "g", Count: 1, Update: tc.own, Tasks: []*Task{{Name: "t", Driver: "raw_exec"}},
			}}}
			j.Canonicalize()
			got := j.TaskGroups[0].Update
			if !equalPtr(got, tc.want) {
				t.Fatalf("group update = %+v, want %+v", got, tc.want)
			}
			if got != nil && got == j.Update {
				t.Error("the group shares the job's update block instead of a copy")
			}
		})
	}
}

package structs

import (
	"errors"
	"strings"
	"testing"
)

// TestValidatePlacementBlocks: affinity and spread blocks are refused,
// naming the block and the rule, when the scheduler could not score by
// them; valid ones pass.
func TestValidatePlacementBlocks(t *testing.T) {
	aff := func(w int8, op string) []*Affinity {
		return []*Affinity{{LTarget: "${meta.rack}", Operand: op, RTarget: "r1", Weight: w}}
	}
	spread := func(w int8, targets ...*SpreadTarget) []*Spread {
		return []*Spread{{Attribute: "${node.datacenter}", Weight: w, SpreadTarget: targets}}
	}
	tests := []struct {
		name string
		edit func(*Job)
		want string // "" valid
	}{
		{"valid", func(j *Job) {
			j.Affinities = aff(-100, "=")
			j.TaskGroups[0].Affinities = aff(100, "set_contains")
			j.Spreads = spread(50, &SpreadTarget{Value: "dc1", Percent: 70}, &SpreadTarget{Value: "dc2", Percent: 30})
		}, ""},
		{"zero weight", func(j *Job) { j.Affinities = aff(0, "=") }, "job affinity 1: weight must not be zero"},
		{"weight over 100", func(j *Job) { j.TaskGroups[0].Affinities = aff(101, "=") }, `group "g": affinity 1: weight 101 must be between -100 and 100`},
		{"task weight under -100", func(j *Job) { j.TaskGroups[0].Tasks[0].Affinities = aff(-101, "=") }, `task "t": affinity 1: weight -101 must be between -100 and 100`},
		{"unknown operator", func(j *Job) { j.Affinities = aff(50, "~") }, `job affinity 1: unknown operator "~"`},
		{"distinct operator", func(j *Job) { j.Affinities = aff(50, "distinct_hosts") }, `job affinity 1: operator "distinct_hosts" is a constraint, not an affinity`},
		{"spread without attribute", func(j *Job) { j.Spreads = []*Spread{{Weight: 50}} }, "job spread 1: attribute is required"},
		{"spread weight negative", func(j *Job) { j.TaskGroups[0].Spreads = spread(-1) }, `group "g" spread 1: weight -1 must be between 0 and 100`},
		{"targets over 100%", func(j *Job) {
			j.Spreads = spread(50, &SpreadTarget{Value: "dc1", Percent: 70}, &SpreadTarget{Value: "dc2", Percent: 40})
		}, "job spread 1: target percentages sum to 110%, more than 100%"},
		{"duplicate target", func(j *Job) {
			j.Spreads = spread(50, &SpreadTarget{Value: "dc1", Percent: 10}, &SpreadTarget{Value: "dc1", Percent: 10})
		}, `job spread 1: target "dc1" is listed more than once`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "j", Name: "j", Type: "service", Priority: 50, Datacenters: []string{"dc1"},
				TaskGroups: []*TaskGroup{{Name: "g", Count: 1, Tasks: []*Task{{Name: "t", Driver: "raw_exec"}}}}}
			tc.edit(j)
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil && (strings.Contains(err.Error(), "affinity") || strings.Contains(err.Error(), "spread")) {
					t.Fatalf("Validate = %v, want no affinity or spread error", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want a ValidationError containing %q", err, tc.want)
			}
		})
	}
}

// TestCanaryRefused: a type without deployments accepts an update block
// that paces updates and refuses one asking for canaries, at job and group
// level; a type with deployments accepts both.
func TestCanaryRefused(t *testing.T) {
	noCanary := &JobTypeBehavior{}
	open := &JobTypeBehavior{Deployments: true}
	tests := []struct {
		name string
		b    *JobTypeBehavior
		edit func(*Job)
		want string
	}{
		{"paced update accepted", noCanary, func(j *Job) { j.Update = &UpdateStrategy{MaxParallel: 2} }, ""},
		{"job canary refused", noCanary, func(j *Job) { j.Update = &UpdateStrategy{MaxParallel: 1, Canary: 1} },
			"update.canary is 1, but pacer jobs do not roll out through deployments"},
		{"group canary refused", noCanary, func(j *Job) { j.TaskGroups[0].Update = &UpdateStrategy{Canary: 2} },
			`group "g": update.canary is 2, but pacer jobs do not roll out through deployments`},
		{"canary accepted where not refused", open, func(j *Job) { j.Update = &UpdateStrategy{Canary: 1} }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := typedJob("pacer", tc.b, tc.edit).Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

package structs

import (
	"strings"
	"testing"
)

// TestValidateConstraintOperands: what the scheduler compiles from a
// constraint's value is compiled at submit, at every level and in
// affinities, so that a typo is refused naming the constraint instead of
// filtering every node; a value read from the node is left to the node.
func TestValidateConstraintOperands(t *testing.T) {
	c := func(op, r string) []*Constraint {
		return []*Constraint{{LTarget: "${attr.os.version}", Operand: op, RTarget: r}}
	}
	tests := []struct {
		name string
		edit func(*Job)
		want string // "" valid
	}{
		{"valid regexp", func(j *Job) { j.Constraints = c("regexp", `^1[0-9]\.`) }, ""},
		{"valid version", func(j *Job) { j.Constraints = c("version", ">= 1.2, < 2.0") }, ""},
		{"pessimistic version", func(j *Job) { j.Constraints = c("version", "~> 1.4.1") }, ""},
		{"valid semver", func(j *Job) { j.TaskGroups[0].Constraints = c("semver", ">= 1.0.0-beta.1") }, ""},
		{"interpolated version", func(j *Job) { j.Constraints = c("version", "${meta.min_version}") }, ""},
		{"valid set_contains", func(j *Job) { j.Constraints = c("set_contains", "a,b") }, ""},
		{"distinct_property count", func(j *Job) { j.Constraints = c("distinct_property", "2") }, ""},
		{"distinct_property without count", func(j *Job) { j.Constraints = c("distinct_property", "") }, ""},

		{"job regexp", func(j *Job) { j.Constraints = c("regexp", "[a-") }, `job constraint 1: regexp "[a-" does not compile: error parsing regexp`},
		{"group regexp", func(j *Job) { j.TaskGroups[0].Constraints = c("regexp", "(x") }, `group "g": constraint 1: regexp "(x" does not compile`},
		{"task regexp", func(j *Job) { j.TaskGroups[0].Tasks[0].Constraints = c("regexp", "*") }, `group "g": task "t": constraint 1: regexp "*" does not compile`},
		{"affinity regexp", func(j *Job) {
			j.Affinities = []*Affinity{{LTarget: "${attr.a}", Operand: "regexp", RTarget: "[", Weight: 50}}
		}, `job affinity 1: regexp "[" does not compile`},
		{"job version", func(j *Job) { j.Constraints = c("version", ">= one.two") }, `job constraint 1: version constraint ">= one.two" is invalid`},
		{"empty version clause", func(j *Job) { j.Constraints = c("version", ">= 1.0,") }, `version constraint ">= 1.0," is invalid`},
		{"group semver", func(j *Job) { j.TaskGroups[0].Constraints = c("semver", "1.2.x") }, `group "g": constraint 1: semver constraint "1.2.x" is invalid`},
		{"affinity version", func(j *Job) {
			j.TaskGroups[0].Affinities = []*Affinity{{LTarget: "${attr.a}", Operand: "version", RTarget: "<<1", Weight: 50}}
		}, `group "g": affinity 1: version constraint "<<1" is invalid`},
		{"set_contains without value", func(j *Job) { j.Constraints = c("set_contains", "") }, "job constraint 1: set_contains needs a value"},
		{"set_contains_any blank", func(j *Job) { j.TaskGroups[0].Tasks[0].Constraints = c("set_contains_any", "  ") }, `task "t": constraint 1: set_contains_any needs a value`},
		{"set_contains_all affinity", func(j *Job) {
			j.Affinities = []*Affinity{{LTarget: "${attr.a}", Operand: "set_contains_all", Weight: 50}}
		}, "job affinity 1: set_contains_all needs a value"},
		{"distinct_property bad count", func(j *Job) { j.Constraints = c("distinct_property", "two") }, `distinct_property value "two" must be a count of at least 1`},
		{"distinct_property zero", func(j *Job) { j.Constraints = c("distinct_property", "0") }, `distinct_property value "0" must be a count of at least 1`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := boundsJob()
			j.Constraints, j.Affinities = nil, nil
			tc.edit(j)
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

package structs

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateNullElements: a job that arrives with null elements (over
// RPC, or from a client that skips the HTTP checks) canonicalizes without a
// panic and is refused naming the element.
func TestValidateNullElements(t *testing.T) {
	task := func() *Task { return &Task{Name: "t", Driver: "raw_exec"} }
	group := func(tasks ...*Task) *TaskGroup { return &TaskGroup{Name: "g", Tasks: tasks} }
	tests := []struct {
		name string
		job  *Job
		want string
	}{
		{"null group", &Job{ID: "j", TaskGroups: []*TaskGroup{nil}}, "group 1: null is not allowed (TaskGroups[0])"},
		{"null task", &Job{ID: "j", TaskGroups: []*TaskGroup{group(task(), nil)}}, `group "g": task 2: null is not allowed (Tasks[1])`},
		{"null job constraint", &Job{ID: "j", Constraints: []*Constraint{nil}, TaskGroups: []*TaskGroup{group(task())}}, "job constraint 1: null is not allowed"},
		{"null group constraint", &Job{ID: "j", TaskGroups: []*TaskGroup{{Name: "g", Constraints: []*Constraint{nil}, Tasks: []*Task{task()}}}}, `group "g": constraint 1: null is not allowed`},
		{"null task constraint", &Job{ID: "j", TaskGroups: []*TaskGroup{group(&Task{Name: "t", Driver: "d", Constraints: []*Constraint{nil}})}}, `task "t": constraint 1: null is not allowed`},
		{"null affinity", &Job{ID: "j", Affinities: []*Affinity{nil}, TaskGroups: []*TaskGroup{group(task())}}, "job affinity 1: null is not allowed"},
		{"null spread", &Job{ID: "j", Spreads: []*Spread{nil}, TaskGroups: []*TaskGroup{group(task())}}, "job spread 1: null is not allowed"},
		{"null spread target", &Job{ID: "j", Spreads: []*Spread{{SpreadTarget: []*SpreadTarget{nil}}}, TaskGroups: []*TaskGroup{group(task())}}, "job spread 1: target 1: null is not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.Canonicalize()
			err := tc.job.Validate()
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a ValidationError", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

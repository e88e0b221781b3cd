package structs

import (
	"strings"
	"testing"
)

// TestValidateTaskNames: a task name the client cannot make a directory
// of (a path that would leave the allocation's directory, or a name that
// collides with its shared alloc/) is refused at submit naming the task;
// it used to be accepted and then fail on every node.
func TestValidateTaskNames(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"../../etc", `task "../../etc": name must not contain slashes`},
		{"a/b", "must not contain slashes"},
		{`a\b`, "must not contain slashes"},
		{"a\x00b", "must not contain NUL characters"},
		{"..", "must not be . or .."},
		{".", "must not be . or .."},
		{"alloc", `must not be "alloc"`},
		{"web-1.front_end", ""},
	} {
		j := &Job{ID: "j", Type: "sysbatch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
			Name: "g", Tasks: []*Task{{Name: tc.name, Driver: "raw_exec"}},
		}}}
		j.Canonicalize()
		err := j.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("task %q: Validate: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("task %q: Validate = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestValidateJobIDCharacters: a job ID may hold any character Nomad
// accepts (its API tests use "job-id/with\\troublesome:characters\n?&字");
// spaces and NUL are refused naming the ID, as Nomad does.
func TestValidateJobIDCharacters(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"job-id/with\\troublesome:characters\n?&字", ""},
		{"tab\there", ""},
		{"a b", `job ID "a b": must not contain spaces`},
		{"a\x00b", "must not contain NUL characters"},
	} {
		j := &Job{ID: tc.id, Name: "n", Type: "sysbatch", Datacenters: []string{"*"}, TaskGroups: []*TaskGroup{{
			Name: "g", Tasks: []*Task{{Name: "t", Driver: "raw_exec"}},
		}}}
		j.Canonicalize()
		err := j.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("job ID %q: Validate: %v", tc.id, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("job ID %q: Validate = %v, want it to contain %q", tc.id, err, tc.want)
		}
	}
}

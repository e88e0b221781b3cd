package client

import (
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestClientStatus(t *testing.T) {
	pending := &structs.TaskState{State: structs.TaskStatePending}
	running := &structs.TaskState{State: structs.TaskStateRunning}
	ok := &structs.TaskState{State: structs.TaskStateDead}
	failed := &structs.TaskState{State: structs.TaskStateDead, Failed: true}
	cases := []struct {
		name   string
		states map[string]*structs.TaskState
		want   string
		desc   string
	}{
		{"no tasks", nil, structs.AllocClientStatusPending, descPending},
		{"all pending", map[string]*structs.TaskState{"a": pending, "b": pending}, structs.AllocClientStatusPending, descPending},
		{"one running", map[string]*structs.TaskState{"a": pending, "b": running}, structs.AllocClientStatusRunning, descRunning},
		{"running and done", map[string]*structs.TaskState{"a": ok, "b": running}, structs.AllocClientStatusRunning, descRunning},
		{"done and pending", map[string]*structs.TaskState{"a": ok, "b": pending}, structs.AllocClientStatusPending, descPending},
		{"all done", map[string]*structs.TaskState{"a": ok, "b": ok}, structs.AllocClientStatusComplete, descComplete},
		{"failed beats running", map[string]*structs.TaskState{"a": failed, "b": running}, structs.AllocClientStatusFailed, descFailed},
		{"failed beats done", map[string]*structs.TaskState{"a": ok, "b": failed}, structs.AllocClientStatusFailed, descFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, desc := clientStatus(tc.states)
			if got != tc.want || desc != tc.desc {
				t.Fatalf("clientStatus = %q (%q); want %q (%q)", got, desc, tc.want, tc.desc)
			}
		})
	}
}

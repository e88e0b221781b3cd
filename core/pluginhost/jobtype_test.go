package pluginhost

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/jobspec"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

// A plugin written from the SDK alone declares little: every field it
// leaves unset takes Nomad's default of its kind (batch for a type that
// runs to completion, service otherwise), and what it declares is kept.
func TestBehaviorDefaults(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          *schedulerpb.JobTypeInfo
		restart     structs.RestartPolicy
		reschedule  *structs.ReschedulePolicy
		maxAttempts int
	}{
		{name: "bare, runs to completion", in: &schedulerpb.JobTypeInfo{Name: "oneshot", RunsToCompletion: true},
			restart: batchRestart, reschedule: &batchResched, maxAttempts: 1},
		{name: "bare, keeps running", in: &schedulerpb.JobTypeInfo{Name: "keeper"},
			restart: serviceRestart, reschedule: &serviceResched, maxAttempts: 1},
		{name: "refuses reschedule", in: &schedulerpb.JobTypeInfo{Name: "pernode", RefusedBlocks: []string{"reschedule"}},
			restart: serviceRestart},
		{name: "partial restart", in: &schedulerpb.JobTypeInfo{Name: "p", RunsToCompletion: true, MaxAttempts: 4,
			DefaultRestart:    &schedulerpb.RestartPolicy{Attempts: 0, Mode: "delay"},
			DefaultReschedule: &schedulerpb.ReschedulePolicy{Attempts: 2, DelayFunction: "fibonacci"}},
			restart:     structs.RestartPolicy{Attempts: 0, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: "delay"},
			reschedule:  &structs.ReschedulePolicy{Attempts: 2, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: "fibonacci", MaxDelay: time.Hour},
			maxAttempts: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Behavior(tc.in)
			if b.DefaultRestart == nil || *b.DefaultRestart != tc.restart {
				t.Errorf("restart = %+v, want %+v", b.DefaultRestart, tc.restart)
			}
			switch {
			case tc.reschedule == nil && b.DefaultReschedule != nil:
				t.Errorf("reschedule = %+v, want none", b.DefaultReschedule)
			case tc.reschedule != nil && (b.DefaultReschedule == nil || *b.DefaultReschedule != *tc.reschedule):
				t.Errorf("reschedule = %+v, want %+v", b.DefaultReschedule, tc.reschedule)
			}
			if b.MaxAttempts < 1 {
				t.Errorf("max attempts %d", b.MaxAttempts)
			}
		})
	}
}

// The job files of issue 27 against a bare declaration: with no restart
// block, and with a partial one laid over the defaults field by field.
func TestBareDeclarationAcceptsJobs(t *testing.T) {
	b := Behavior(&schedulerpb.JobTypeInfo{Name: "oneshot", RunsToCompletion: true})
	opts := jobspec.Options{Defaults: func(string) *structs.JobTypeBehavior { return b.Copy() }}
	for name, restart := range map[string]string{
		"no restart block": "",
		"partial restart":  "restart {\n      attempts = 0\n      mode = \"fail\"\n    }",
	} {
		src := `job "hi" {
  type = "oneshot"
  group "hi" {
    ` + restart + `
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`
		job, err := jobspec.ParseAndValidateWith("hi.hcl", []byte(src), opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := job.TaskGroups[0].RestartPolicy
		if got == nil || got.Interval != 24*time.Hour || got.Delay != 15*time.Second || got.Mode != "fail" {
			t.Errorf("%s: restart = %+v, want batch defaults under the block", name, got)
		}
	}
}

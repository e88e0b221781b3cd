package jobspec

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// TestTypeDefaults pins how the parser uses the declaration its caller
// gives for the job's type, and what it does without one. It checks the
// job before Canonicalize, which is where the parser's part ends: filling
// an absent block is Canonicalize's (from Job.TypeBehavior) or the
// server's.
func TestTypeDefaults(t *testing.T) {
	// gpuBatch is a third-party type: nothing about it is known by name.
	gpuBatch := &structs.JobTypeBehavior{
		RunsToCompletion:  true,
		DefaultRestart:    &structs.RestartPolicy{Attempts: 7, Interval: time.Hour, Delay: 3 * time.Second, Mode: structs.RestartPolicyModeDelay},
		DefaultReschedule: &structs.ReschedulePolicy{Attempts: 4, Interval: 2 * time.Hour, Delay: 9 * time.Second, DelayFunction: "constant"},
		RefusedBlocks:     []string{structs.BlockUpdate},
	}
	declares := func(types map[string]*structs.JobTypeBehavior) Options {
		return Options{Defaults: func(jobType string) *structs.JobTypeBehavior { return types[jobType] }}
	}
	withGPU := declares(map[string]*structs.JobTypeBehavior{"gpu-batch": gpuBatch})
	// A type declaring nothing refuses nothing and has no defaults.
	withBare := declares(map[string]*structs.JobTypeBehavior{"gpu-batch": {}})
	offline := Options{}

	const partial = `job "j" {
  type = "gpu-batch"
  update {
    max_parallel = 2
  }
  group "g" {
    restart {
      attempts = 1
    }
    reschedule {
      delay = "1m"
    }
    task "t" {
      driver = "raw_exec"
      restart {
        mode = "fail"
      }
    }
  }
}`
	const absent = `job "j" {
  type = "gpu-batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
    }
    task "partial" {
      driver = "raw_exec"
      restart {
        attempts = 5
      }
    }
  }
}`
	gpuRestart := func(edit func(*structs.RestartPolicy)) *structs.RestartPolicy {
		r := *gpuBatch.DefaultRestart
		edit(&r)
		return &r
	}
	tests := []struct {
		name         string
		src          string
		opts         Options
		groupRestart *structs.RestartPolicy
		// taskRestart is each task's policy, in file order.
		taskRestart []*structs.RestartPolicy
		reschedule  *structs.ReschedulePolicy
		groupUpdate bool
		behavior    *structs.JobTypeBehavior
	}{
		{
			name: "partial blocks over the declared defaults", src: partial, opts: withGPU,
			groupRestart: gpuRestart(func(r *structs.RestartPolicy) { r.Attempts = 1 }),
			taskRestart: []*structs.RestartPolicy{gpuRestart(func(r *structs.RestartPolicy) {
				r.Attempts, r.Mode = 1, structs.RestartPolicyModeFail
			})},
			reschedule: &structs.ReschedulePolicy{Attempts: 4, Interval: 2 * time.Hour, Delay: time.Minute, DelayFunction: "constant"},
			// gpu-batch refuses update: the job-level block stays there, for
			// validation to refuse once.
			groupUpdate: false,
			behavior:    gpuBatch,
		},
		{
			name: "partial blocks over zero values without a declaration", src: partial, opts: offline,
			groupRestart: &structs.RestartPolicy{Attempts: 1},
			taskRestart:  []*structs.RestartPolicy{{Attempts: 1, Mode: structs.RestartPolicyModeFail}},
			reschedule:   &structs.ReschedulePolicy{Delay: time.Minute},
			groupUpdate:  true,
		},
		{
			name: "a type the caller does not know parses as offline", src: partial,
			opts:         declares(map[string]*structs.JobTypeBehavior{"other": gpuBatch}),
			groupRestart: &structs.RestartPolicy{Attempts: 1},
			taskRestart:  []*structs.RestartPolicy{{Attempts: 1, Mode: structs.RestartPolicyModeFail}},
			reschedule:   &structs.ReschedulePolicy{Delay: time.Minute},
			groupUpdate:  true,
		},
		{
			name: "a type refusing nothing gets the job's update block in its groups", src: partial, opts: withBare,
			groupRestart: &structs.RestartPolicy{Attempts: 1},
			taskRestart:  []*structs.RestartPolicy{{Attempts: 1, Mode: structs.RestartPolicyModeFail}},
			reschedule:   &structs.ReschedulePolicy{Delay: time.Minute},
			groupUpdate:  true,
			behavior:     &structs.JobTypeBehavior{},
		},
		{
			name: "absent blocks stay nil without a declaration", src: absent, opts: offline,
			taskRestart: []*structs.RestartPolicy{nil, {Attempts: 5}},
		},
		{
			name: "absent blocks are left to Canonicalize with a declaration", src: absent, opts: withGPU,
			taskRestart: []*structs.RestartPolicy{nil, gpuRestart(func(r *structs.RestartPolicy) { r.Attempts = 5 })},
			behavior:    gpuBatch,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job, err := parse("job.hcl", []byte(tt.src), tt.opts)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			tg := job.TaskGroups[0]
			if !reflect.DeepEqual(tg.RestartPolicy, tt.groupRestart) {
				t.Errorf("group restart = %s, want %s", show(tg.RestartPolicy), show(tt.groupRestart))
			}
			for i, want := range tt.taskRestart {
				if got := tg.Tasks[i].RestartPolicy; !reflect.DeepEqual(got, want) {
					t.Errorf("task %q restart = %s, want %s", tg.Tasks[i].Name, show(got), show(want))
				}
			}
			if !reflect.DeepEqual(tg.ReschedulePolicy, tt.reschedule) {
				t.Errorf("reschedule = %s, want %s", show(tg.ReschedulePolicy), show(tt.reschedule))
			}
			if got := tg.Update != nil; got != tt.groupUpdate {
				t.Errorf("group has an update block: %v, want %v (job's: %+v)", got, tt.groupUpdate, job.Update)
			}
			if !reflect.DeepEqual(job.TypeBehavior, tt.behavior) {
				t.Errorf("TypeBehavior = %+v, want %+v", job.TypeBehavior, tt.behavior)
			}
			if tt.behavior != nil && job.TypeBehavior == gpuBatch {
				t.Error("the job shares the caller's declaration instead of owning a copy")
			}
		})
	}
}

// TestTypeDefaultsAfterCanonicalize: with a declaration, ParseWith's job
// has every group and task policy filled from it.
func TestTypeDefaultsAfterCanonicalize(t *testing.T) {
	job, err := ParseWith("job.hcl", []byte(`job "j" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
    }
  }
}`), testOptions)
	if err != nil {
		t.Fatal(err)
	}
	want := testTypes[structs.JobTypeBatch].DefaultRestart
	tg := job.TaskGroups[0]
	if !reflect.DeepEqual(tg.RestartPolicy, want) || !reflect.DeepEqual(tg.Tasks[0].RestartPolicy, want) {
		t.Errorf("restart = %s / %s, want %s", show(tg.RestartPolicy), show(tg.Tasks[0].RestartPolicy), show(want))
	}
}

// TestDefaultJobType: a job that names no type gets the declaration of
// structs.DefaultJobType.
func TestDefaultJobType(t *testing.T) {
	var asked []string
	opts := Options{Defaults: func(jobType string) *structs.JobTypeBehavior {
		asked = append(asked, jobType)
		return testTypes[jobType]
	}}
	job, err := parse("job.hcl", []byte(`job "j" {
  group "g" {
    reschedule {
      attempts = 3
    }
  }
}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0] != structs.DefaultJobType {
		t.Errorf("Defaults asked for %q, want once for %q", asked, structs.DefaultJobType)
	}
	want := *testTypes[structs.DefaultJobType].DefaultReschedule
	want.Attempts = 3
	if got := job.TaskGroups[0].ReschedulePolicy; got == nil || *got != want {
		t.Errorf("reschedule = %s, want %+v", show(got), want)
	}
}

// show renders a policy pointer for a failure message.
func show[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("%+v", *p)
}

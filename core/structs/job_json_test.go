package structs

import (
	"encoding/json"
	"testing"
	"time"
)

// A JSON job's group without Count runs one allocation, as Nomad
// canonicalizes it; an explicit 0 stays 0; a Copy keeps either.
func TestTaskGroupJSONCount(t *testing.T) {
	cases := []struct {
		name, body string
		want       int
	}{
		{"absent", `{"Name":"g"}`, 1},
		{"zero", `{"Name":"g","Count":0}`, 0},
		{"three", `{"Name":"g","Count":3}`, 3},
		{"null", `{"Name":"g","Count":null}`, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var job Job
			if err := json.Unmarshal([]byte(`{"ID":"j","TaskGroups":[`+tc.body+`]}`), &job); err != nil {
				t.Fatal(err)
			}
			if got := job.TaskGroups[0].Count; got != tc.want {
				t.Fatalf("Count = %d; want %d", got, tc.want)
			}
			if got := job.Copy().TaskGroups[0].Count; got != tc.want {
				t.Fatalf("Copy's Count = %d; want %d", got, tc.want)
			}
			if job.TaskGroups[0].Name != "g" {
				t.Fatalf("Name = %q; the other fields must decode too", job.TaskGroups[0].Name)
			}
		})
	}
	var tg TaskGroup
	if err := json.Unmarshal([]byte(`{"Count":"x"}`), &tg); err == nil {
		t.Fatal("a string Count decoded without error")
	}
}

// The blocks whose Nomad API fields are pointers: a null field takes
// Nomad's default, an explicit zero stays, and a job written back as JSON
// (every field explicit) decodes to itself.
func TestJobJSONNullDefaults(t *testing.T) {
	body := `{"ID":"j","Type":"service",
		"Update":{"MaxParallel":3,"Stagger":null},
		"Periodic":{"Spec":"* * * * *","Enabled":null},
		"Affinities":[{"LTarget":"a","RTarget":"b","Operand":"=","Weight":null}],
		"TaskGroups":[
			{"Name":"merged","Update":{"Canary":2,"MaxParallel":null},"EphemeralDisk":{"Sticky":true,"SizeMB":null},
			 "RestartPolicy":{"Attempts":0,"Interval":null,"Delay":null,"Mode":"fail"},
			 "ReschedulePolicy":{"Attempts":null,"Unlimited":false},
			 "Tasks":[{"Name":"t","RestartPolicy":{"Attempts":9}}]},
			{"Name":"zero","Update":{"MaxParallel":0}},
			{"Name":"none"}]}`
	var job Job
	if err := json.Unmarshal([]byte(body), &job); err != nil {
		t.Fatal(err)
	}
	d := DefaultUpdateStrategy()
	if u := job.Update; u == nil || u.MaxParallel != 3 || u.Stagger != d.Stagger || u.HealthCheck != d.HealthCheck || u.ProgressDeadline != d.ProgressDeadline {
		t.Fatalf("job Update = %+v", u)
	}
	if u := job.TaskGroups[0].Update; u.Canary != 2 || u.MaxParallel != 3 || u.MinHealthyTime != d.MinHealthyTime {
		t.Fatalf("merged group Update = %+v; want Canary 2 over the job's MaxParallel 3", u)
	}
	if u := job.TaskGroups[1].Update; u.MaxParallel != 0 || u.HealthyDeadline != d.HealthyDeadline {
		t.Fatalf("explicit zero group Update = %+v; want MaxParallel 0 kept", u)
	}
	if job.TaskGroups[2].Update != nil {
		t.Fatalf("group without update = %+v; Canonicalize copies the job's", job.TaskGroups[2].Update)
	}
	if !job.Periodic.Enabled {
		t.Fatal("null Periodic.Enabled decoded false")
	}
	if job.Affinities[0].Weight != DefaultAffinityWeight {
		t.Fatalf("null affinity Weight = %d", job.Affinities[0].Weight)
	}
	if e := job.TaskGroups[0].EphemeralDisk; !e.Sticky || e.SizeMB != DefaultEphemeralDiskMB {
		t.Fatalf("EphemeralDisk = %+v", e)
	}

	b := &JobTypeBehavior{
		DefaultRestart:    &RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: "fail"},
		DefaultReschedule: &ReschedulePolicy{Delay: 30 * time.Second, DelayFunction: "exponential", MaxDelay: time.Hour, Unlimited: true},
	}
	job.FillNullPolicies(b)
	g := job.TaskGroups[0]
	if got, want := *g.RestartPolicy, (RestartPolicy{Attempts: 0, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: "fail"}); got != want {
		t.Fatalf("group RestartPolicy = %+v; want %+v", got, want)
	}
	if got, want := *g.ReschedulePolicy, (ReschedulePolicy{Delay: 30 * time.Second, DelayFunction: "exponential", MaxDelay: time.Hour}); got != want {
		t.Fatalf("group ReschedulePolicy = %+v; want %+v (explicit Unlimited false kept)", got, want)
	}
	if got, want := *g.Tasks[0].RestartPolicy, (RestartPolicy{Attempts: 9, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: "fail"}); got != want {
		t.Fatalf("task RestartPolicy = %+v; want %+v (the group's under its own)", got, want)
	}

	// Written back and read again, nothing changes.
	out, err := json.Marshal(&job)
	if err != nil {
		t.Fatal(err)
	}
	var again Job
	if err := json.Unmarshal(out, &again); err != nil {
		t.Fatal(err)
	}
	out2, _ := json.Marshal(&again)
	if string(out) != string(out2) {
		t.Fatalf("round trip changed the job:\n%s\n%s", out, out2)
	}
	off := Job{}
	if err := json.Unmarshal([]byte(`{"Periodic":{"Enabled":false},"Update":{"Stagger":0}}`), &off); err != nil {
		t.Fatal(err)
	}
	if off.Periodic.Enabled || off.Update.Stagger != 0 {
		t.Fatalf("explicit false/0 not kept: %+v %+v", off.Periodic, off.Update)
	}
}

// A JSON scaling block without Enabled is enabled and without Min has the
// group's count as its min; explicit values stay.
func TestScalingJSONNullDefaults(t *testing.T) {
	cases := []struct {
		body      string
		enabled   bool
		min       int64
		wantCount int
	}{
		{`{"Name":"g","Count":3,"Scaling":{"Max":5}}`, true, 3, 3},
		{`{"Name":"g","Scaling":{"Max":5,"Enabled":null,"Min":null}}`, true, 1, 1},
		{`{"Name":"g","Scaling":{"Max":5,"Min":2}}`, true, 2, 2},
		{`{"Name":"g","Count":4,"Scaling":{"Max":5,"Min":0,"Enabled":false}}`, false, 0, 4},
	}
	for _, tc := range cases {
		var tg TaskGroup
		if err := json.Unmarshal([]byte(tc.body), &tg); err != nil {
			t.Fatal(err)
		}
		if tg.Scaling.Enabled != tc.enabled || tg.Scaling.Min != tc.min || tg.Count != tc.wantCount {
			t.Errorf("%s: Enabled %v Min %d Count %d; want %v %d %d", tc.body, tg.Scaling.Enabled, tg.Scaling.Min, tg.Count, tc.enabled, tc.min, tc.wantCount)
		}
	}
}

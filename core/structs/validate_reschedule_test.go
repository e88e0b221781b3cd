package structs

import (
	"strings"
	"testing"
	"time"
)

// TestValidateReschedulePolicy: a reschedule block is held to Nomad's
// delay functions and to bounds that keep what a scheduler derives from
// it acceptable to the core; each refusal names the group, the block and
// the rule.
func TestValidateReschedulePolicy(t *testing.T) {
	b := &JobTypeBehavior{RunsToCompletion: true}
	ok := func() *ReschedulePolicy {
		return &ReschedulePolicy{Attempts: 2, Interval: time.Hour, Delay: time.Second, DelayFunction: "constant"}
	}
	cases := []struct {
		name string
		edit func(*ReschedulePolicy)
		want string // "" = valid
	}{
		{"valid", func(*ReschedulePolicy) {}, ""},
		{"empty delay function is constant", func(r *ReschedulePolicy) { r.DelayFunction = "" }, ""},
		{"fibonacci with a cap", func(r *ReschedulePolicy) { r.DelayFunction, r.MaxDelay = "fibonacci", time.Minute }, ""},
		{"unlimited", func(r *ReschedulePolicy) { r.Attempts, r.Unlimited = 0, true }, ""},
		{"unknown delay function", func(r *ReschedulePolicy) { r.DelayFunction = "linear" }, `group "g": reschedule: delay_function "linear" is not valid`},
		{"negative attempts", func(r *ReschedulePolicy) { r.Attempts = -1 }, "reschedule: attempts must be between 0 and 1024 (got -1)"},
		{"too many attempts", func(r *ReschedulePolicy) { r.Attempts = 5000 }, "attempts must be between 0 and 1024 (got 5000)"},
		{"negative interval", func(r *ReschedulePolicy) { r.Interval = -time.Second }, "reschedule: interval must not be negative"},
		{"negative delay", func(r *ReschedulePolicy) { r.Delay = -time.Second }, "reschedule: delay must not be negative"},
		{"delay beyond a year", func(r *ReschedulePolicy) { r.Delay = 400 * 24 * time.Hour }, "delay and max_delay must be at most"},
		{"max_delay below delay", func(r *ReschedulePolicy) { r.MaxDelay = time.Millisecond }, "max_delay (1ms) must not be less than delay (1s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rp := ok()
			tc.edit(rp)
			j := typedJob("oneshot", b, func(j *Job) { j.TaskGroups[0].ReschedulePolicy = rp })
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want valid", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

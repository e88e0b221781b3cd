package server

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// TestAllocRunningFollowsDeclaredType: an alloc that starts to run
// evaluates its job again (rolling-update) when its type declares
// EvalOnAllocRunning, and only then; an alloc that fails does not make
// that eval.
func TestAllocRunningFollowsDeclaredType(t *testing.T) {
	starter := declaredType{runAs: "system", b: structs.JobTypeBehavior{
		EvalOnAllocRunning: true,
		DefaultRestart:     &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
	}}
	s := testServer(t, func(c *Config) { c.Schedulers = declRouter{"starter": starter, "plain": plain} })
	n := testNode("a")
	registerNodes(t, s, n)
	for _, tc := range []struct {
		id, typ, status string
		want            bool
	}{
		{"starts", "starter", structs.AllocClientStatusRunning, true},
		{"fails", "starter", structs.AllocClientStatusFailed, false},
		{"zero", "plain", structs.AllocClientStatusRunning, false},
	} {
		// UpdateAllocs writes the eval with the alloc update, so its
		// absence is final once runJobOn returns.
		runJobOn(t, s, madeUpJob(tc.id, tc.typ), n, tc.status)
		evs, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, tc.id)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, e := range evs {
			if e.TriggeredBy == structs.EvalTriggerRollingUpdate && e.NodeID == n.ID {
				got++
			}
		}
		if (got == 1) != tc.want || got > 1 {
			t.Errorf("%s (%s, %s): %d rolling-update evals, want %v", tc.id, tc.typ, tc.status, got, tc.want)
		}
	}
}

package cluster

import (
	"strings"
	"testing"
	"time"
)

// The leaderless times of a rolling restart are judged by when they
// happened: a leader's stop may cost one short election, one gap at a
// follower's stop (a late heartbeat on a loaded machine) is noted only,
// and a gap at every follower's stop, or a long one, is a failure.
func TestJudgeGaps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	stops := []stopWindow{
		{server: "s1", from: at(0), to: at(10)},
		{server: "s2", leader: true, from: at(10), to: at(20)},
		{server: "s3", from: at(20), to: at(30)},
	}
	gap := func(s int, d time.Duration) leaderGap { return leaderGap{at(s), d} }
	for _, tc := range []struct {
		name string
		gaps []leaderGap
		want string // a problem that must be reported; "" for none
	}{
		{"none", nil, ""},
		{"the leader's own stop", []leaderGap{gap(11, 300*time.Millisecond)}, ""},
		{"one late heartbeat at a follower's stop", []leaderGap{gap(11, 200*time.Millisecond), gap(25, time.Second)}, ""},
		{"every follower's stop", []leaderGap{gap(2, time.Second), gap(22, time.Second)}, "each of the 2 graceful stops of a follower"},
		{"a long gap", []leaderGap{gap(12, 12*time.Second)}, "no leader for 12s"},
	} {
		problems, notes := judgeGaps(tc.gaps, stops)
		if len(notes) != len(stops) {
			t.Errorf("%s: notes %v; want one per stop", tc.name, notes)
		}
		got := strings.Join(problems, "; ")
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: problems %q; want none", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: problems %q; want one saying %q", tc.name, got, tc.want)
		}
	}
}

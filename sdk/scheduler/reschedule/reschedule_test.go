package reschedule

import (
	"regexp"
	"testing"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func policy(attempts int32, interval, delay time.Duration, fn string, maxDelay time.Duration, unlimited bool) *pb.ReschedulePolicy {
	return &pb.ReschedulePolicy{
		Attempts: attempts, IntervalNs: int64(interval), DelayNs: int64(delay), DelayFunction: fn,
		MaxDelayNs: int64(maxDelay), Unlimited: unlimited,
	}
}

func ev(at time.Time, delay time.Duration) *pb.RescheduleEvent {
	return &pb.RescheduleEvent{RescheduleTimeNs: at.UnixNano(), DelayNs: int64(delay), PrevAllocId: "p", PrevNodeId: "n"}
}

func failedAt(at time.Time, events ...*pb.RescheduleEvent) *pb.Allocation {
	return &pb.Allocation{Id: "a1", NodeId: "node-1", ClientStatus: "failed", ModifyTimeNs: at.UnixNano(), RescheduleEvents: events}
}

// TestDelaySeries replays successive failures of one lineage: each failure
// is rescheduled with the delay the function gives, and that delay becomes
// the next event.
func TestDelaySeries(t *testing.T) {
	s := time.Second
	cases := []struct {
		name string
		p    *pb.ReschedulePolicy
		want []time.Duration
	}{
		{"constant", policy(0, 0, 5*s, DelayConstant, 0, true), []time.Duration{5 * s, 5 * s, 5 * s, 5 * s}},
		{"constant ignores max_delay", policy(0, 0, 5*s, DelayConstant, 2*s, true), []time.Duration{5 * s, 5 * s, 5 * s}},
		{"exponential", policy(0, 0, 5*s, DelayExponential, 0, true), []time.Duration{5 * s, 10 * s, 20 * s, 40 * s, 80 * s}},
		{"exponential capped", policy(0, 0, 5*s, DelayExponential, 30*s, true), []time.Duration{5 * s, 10 * s, 20 * s, 30 * s, 30 * s}},
		{"fibonacci", policy(0, 0, 5*s, DelayFibonacci, 0, true), []time.Duration{5 * s, 5 * s, 10 * s, 15 * s, 25 * s, 40 * s}},
		{"fibonacci capped", policy(0, 0, 5*s, DelayFibonacci, 12*s, true), []time.Duration{5 * s, 5 * s, 10 * s, 12 * s, 12 * s}},
		{"unknown function is constant", policy(0, 0, 7*s, "linear", 0, true), []time.Duration{7 * s, 7 * s}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var events []*pb.RescheduleEvent
			fail := t0
			for i, want := range tc.want {
				// Each replacement fails one second after it started: a
				// crash loop, never a reset.
				d := Decide(tc.p, failedAt(fail, events...), fail.Add(time.Hour))
				if d.Kind != Now || d.Delay != want || !d.At.Equal(fail.Add(want)) {
					t.Fatalf("failure %d: got %v delay %v at %v, want now delay %v at %v", i, d.Kind, d.Delay, d.At, want, fail.Add(want))
				}
				events = NextEvents(tc.p, failedAt(fail, events...), d.At, d.Delay)
				fail = d.At.Add(time.Second)
			}
		})
	}
}

func TestNextDelayResetAfterHealthySpell(t *testing.T) {
	s := time.Second
	cases := []struct {
		name   string
		p      *pb.ReschedulePolicy
		events []*pb.RescheduleEvent
		failed time.Time
		want   time.Duration
	}{
		{"capped, failed soon after: stays at cap", policy(0, 0, 5*s, DelayExponential, 30*s, true),
			[]*pb.RescheduleEvent{ev(t0, 30*s)}, t0.Add(10 * s), 30 * s},
		{"capped, ran longer than the cap: back to delay", policy(0, 0, 5*s, DelayExponential, 30*s, true),
			[]*pb.RescheduleEvent{ev(t0, 30*s)}, t0.Add(time.Minute), 5 * s},
		{"not capped: no reset however long it ran", policy(0, 0, 5*s, DelayExponential, 0, true),
			[]*pb.RescheduleEvent{ev(t0, 40*s)}, t0.Add(time.Hour), 80 * s},
		{"fibonacci restarts its series after a reset", policy(0, 0, 5*s, DelayFibonacci, 12*s, true),
			[]*pb.RescheduleEvent{ev(t0, 12*s), ev(t0.Add(time.Minute), 5*s)}, t0.Add(time.Minute + s), 5 * s},
		{"uncapped exponential stops at MaxWait", policy(0, 0, 5*s, DelayExponential, 0, true),
			[]*pb.RescheduleEvent{ev(t0, MaxWait-s)}, t0.Add(s), MaxWait},
		{"corrupt negative delay never shortens the wait", policy(0, 0, 5*s, DelayExponential, 0, true),
			[]*pb.RescheduleEvent{ev(t0, -10*s)}, t0.Add(s), 5 * s},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := NextDelay(tc.p, tc.events, tc.failed); got != tc.want {
				t.Fatalf("NextDelay = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	s := time.Second
	h := time.Hour
	batch := policy(1, 24*h, 5*s, DelayConstant, 0, false)
	cases := []struct {
		name  string
		p     *pb.ReschedulePolicy
		alloc *pb.Allocation
		now   time.Time
		kind  Kind
		at    time.Time
	}{
		{"nil policy", nil, failedAt(t0), t0.Add(h), NotEligible, time.Time{}},
		{"zero attempts", policy(0, h, 5*s, DelayConstant, 0, false), failedAt(t0), t0.Add(h), NotEligible, time.Time{}},
		{"first failure, due", batch, failedAt(t0), t0.Add(5 * s), Now, t0.Add(5 * s)},
		{"first failure, not yet due", batch, failedAt(t0), t0.Add(4 * s), Later, t0.Add(5 * s)},
		{"attempts used up within the interval", batch, failedAt(t0, ev(t0.Add(-h), 5*s)), t0.Add(h), NotEligible, time.Time{}},
		{"the attempt left the interval: eligible again", batch, failedAt(t0, ev(t0.Add(-25*h), 5*s)), t0.Add(h), Now, t0.Add(5 * s)},
		{"two attempts, one used", policy(2, h, s, DelayConstant, 0, false), failedAt(t0, ev(t0.Add(-10*s), s)), t0, Later, t0.Add(s)},
		{"two attempts, both used", policy(2, h, s, DelayConstant, 0, false),
			failedAt(t0, ev(t0.Add(-20*s), s), ev(t0.Add(-10*s), s)), t0.Add(h), NotEligible, time.Time{}},
		{"two attempts, the older outside the window", policy(2, h, s, DelayConstant, 0, false),
			failedAt(t0, ev(t0.Add(-2*h), s), ev(t0.Add(-10*s), s)), t0.Add(h), Now, t0.Add(s)},
		{"next delay reaches the interval", policy(5, 30*s, 20*s, DelayExponential, 0, false),
			failedAt(t0, ev(t0.Add(-s), 20*s)), t0.Add(h), NotEligible, time.Time{}},
		{"unlimited ignores attempts and interval", policy(0, 0, 5*s, DelayConstant, 0, true),
			failedAt(t0, ev(t0.Add(-3*s), 5*s), ev(t0.Add(-2*s), 5*s), ev(t0.Add(-s), 5*s)), t0.Add(h), Now, t0.Add(5 * s)},
		{"zero delay is due at the failure", policy(1, h, 0, DelayConstant, 0, false), failedAt(t0), t0, Now, t0},
		{"forced: attempts used up", batch, forced(failedAt(t0, ev(t0.Add(-h), 5*s))), t0.Add(s), Now, t0.Add(s)},
		{"forced: not yet due", batch, forced(failedAt(t0)), t0.Add(s), Now, t0.Add(s)},
		{"forced: no policy", nil, forced(failedAt(t0)), t0.Add(s), Now, t0.Add(s)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.p, tc.alloc, tc.now)
			if d.Kind != tc.kind || !d.At.Equal(tc.at) {
				t.Fatalf("Decide = %v at %v, want %v at %v", d.Kind, d.At, tc.kind, tc.at)
			}
		})
	}
}

func TestNextEvents(t *testing.T) {
	s := time.Second
	h := time.Hour
	old := ev(t0.Add(-2*h), s)
	recent := ev(t0.Add(-10*s), s)
	cases := []struct {
		name     string
		p        *pb.ReschedulePolicy
		past     []*pb.RescheduleEvent
		wantKept []*pb.RescheduleEvent
	}{
		{"first reschedule", policy(2, h, s, DelayConstant, 0, false), nil, nil},
		{"events outside the interval are dropped", policy(3, h, s, DelayConstant, 0, false),
			[]*pb.RescheduleEvent{old, recent}, []*pb.RescheduleEvent{recent}},
		{"unlimited keeps the last few", policy(0, 0, s, DelayConstant, 0, true),
			[]*pb.RescheduleEvent{ev(t0.Add(-6*s), s), ev(t0.Add(-5*s), s), ev(t0.Add(-4*s), s), ev(t0.Add(-3*s), s), ev(t0.Add(-2*s), s)},
			[]*pb.RescheduleEvent{ev(t0.Add(-5*s), s), ev(t0.Add(-4*s), s), ev(t0.Add(-3*s), s), ev(t0.Add(-2*s), s)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev := failedAt(t0.Add(-s), tc.past...)
			got := NextEvents(tc.p, prev, t0, 3*s)
			if len(got) != len(tc.wantKept)+1 {
				t.Fatalf("got %d events, want %d", len(got), len(tc.wantKept)+1)
			}
			for i, w := range tc.wantKept {
				if got[i].GetRescheduleTimeNs() != w.GetRescheduleTimeNs() {
					t.Fatalf("event %d at %d, want %d", i, got[i].GetRescheduleTimeNs(), w.GetRescheduleTimeNs())
				}
				if got[i] == w {
					t.Fatalf("event %d is shared with the previous alloc's tracker", i)
				}
			}
			last := got[len(got)-1]
			if last.GetRescheduleTimeNs() != t0.UnixNano() || last.GetPrevAllocId() != "a1" || last.GetPrevNodeId() != "node-1" || last.GetDelayNs() != int64(3*s) {
				t.Fatalf("new event = %v", last)
			}
		})
	}
}

func TestFollowups(t *testing.T) {
	s := time.Second
	pending := []Pending{
		{AllocID: "c", At: t0.Add(4 * s)},
		{AllocID: "a", At: t0},
		{AllocID: "d", At: t0.Add(30 * s)},
		{AllocID: "b", At: t0.Add(5 * s)}, // exactly at the window's edge: joins
		{AllocID: "e", At: t0.Add(36 * s)},
	}
	evals, marks := Followups("eval-1", "web", pending)
	if len(evals) != 3 {
		t.Fatalf("got %d evals, want 3: %v", len(evals), evals)
	}
	wantWait := []time.Time{t0, t0.Add(30 * s), t0.Add(36 * s)}
	for i, e := range evals {
		if e.GetWaitUntilNs() != wantWait[i].UnixNano() {
			t.Fatalf("eval %d waits until %d, want %d", i, e.GetWaitUntilNs(), wantWait[i].UnixNano())
		}
	}
	want := map[string]string{"a": evals[0].Id, "b": evals[0].Id, "c": evals[0].Id, "d": evals[1].Id, "e": evals[2].Id}
	if len(marks) != len(want) {
		t.Fatalf("got %d marks, want %d", len(marks), len(want))
	}
	for _, m := range marks {
		if want[m.GetAllocId()] != m.GetFollowupEvalId() {
			t.Fatalf("alloc %s marked with %s, want %s", m.GetAllocId(), m.GetFollowupEvalId(), want[m.GetAllocId()])
		}
	}
	again, _ := Followups("eval-1", "web", pending)
	for i := range evals {
		if again[i].Id != evals[i].Id {
			t.Fatal("the same pending allocs gave different eval IDs")
		}
	}
	if e, m := Followups("eval-1", "web", nil); e != nil || m != nil {
		t.Fatal("no pending allocs must give no evals")
	}
}

func TestFollowupEvalID(t *testing.T) {
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a := FollowupEvalID("e1", "g", 1)
	if !uuid.MatchString(a) {
		t.Fatalf("%q is not a version-8 UUID", a)
	}
	if a != FollowupEvalID("e1", "g", 1) {
		t.Fatal("not deterministic")
	}
	distinct := map[string]bool{a: true}
	for _, id := range []string{FollowupEvalID("e2", "g", 1), FollowupEvalID("e1", "h", 1), FollowupEvalID("e1", "g", 2), FollowupEvalID("e1g", "", 1)} {
		if distinct[id] {
			t.Fatalf("collision: %s", id)
		}
		distinct[id] = true
	}
}

func forced(a *pb.Allocation) *pb.Allocation {
	a.ForceReschedule = true
	return a
}

// TestClock: the core's clock when it sends one, never before what the
// allocations prove has passed; LatestTime from an older core.
func TestClock(t *testing.T) {
	allocs := []*pb.Allocation{{ModifyTimeNs: 100}}
	cases := []struct {
		name  string
		nowNs int64
		want  int64
	}{
		{"older core: latest alloc time", 0, 100},
		{"core clock", 500, 500},
		{"core clock behind the allocs", 50, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Clock(&pb.ScheduleRequest{NowNs: tc.nowNs, Allocs: allocs}).UnixNano(); got != tc.want {
				t.Fatalf("Clock = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestLatestTime(t *testing.T) {
	req := &pb.ScheduleRequest{Allocs: []*pb.Allocation{{ModifyTimeNs: 5}, {ModifyTimeNs: 9}, {}}}
	if got := LatestTime(req); got.UnixNano() != 9 {
		t.Fatalf("LatestTime = %d, want 9", got.UnixNano())
	}
	if !LatestTime(&pb.ScheduleRequest{}).IsZero() {
		t.Fatal("no allocs must give the zero time")
	}
}

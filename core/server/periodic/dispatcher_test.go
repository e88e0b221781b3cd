package periodic

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a Config.Now the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(at time.Time) {
	c.mu.Lock()
	c.now = at
	c.mu.Unlock()
}

// fixture is a dispatcher over a state store the test seeds directly. Its
// Register writes the child, a pending eval of it and the parent's launch
// record, as the FSM's job-register entry does.
type fixture struct {
	t     *testing.T
	st    *state.StateStore
	clock *fakeClock
	d     *Dispatcher

	mu       sync.Mutex
	idx      uint64
	launched []string // child IDs, in order
}

func newFixture(t *testing.T, now time.Time) *fixture {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, st: st, clock: &fakeClock{now: now}, idx: 100}
	f.d = New(Config{
		State:    func() State { return f.st },
		Register: f.register,
		Now:      f.clock.Now,
	})
	return f
}

func (f *fixture) register(child *structs.Job) (*structs.Evaluation, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idx++
	if err := f.st.UpsertJob(f.idx, child); err != nil {
		return nil, 0, err
	}
	ev := &structs.Evaluation{ID: "ev-" + child.ID, Namespace: child.Namespace, JobID: child.ID,
		Status: structs.EvalStatusPending, TriggeredBy: structs.EvalTriggerPeriodicJob}
	if err := f.st.UpsertEvals(f.idx, []*structs.Evaluation{ev}); err != nil {
		return nil, 0, err
	}
	if err := f.st.UpsertPeriodicLaunch(f.idx, &structs.PeriodicLaunch{ID: child.ParentID, Namespace: child.Namespace, Launch: f.clock.Now()}); err != nil {
		return nil, 0, err
	}
	f.launched = append(f.launched, child.ID)
	return ev, f.idx, nil
}

func (f *fixture) children() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.launched...)
}

// job stores a periodic sysbatch job (and its last launch, unless zero).
func (f *fixture) job(id, spec string, overlap bool, last time.Time) *structs.Job {
	f.t.Helper()
	j := &structs.Job{ID: id, Namespace: structs.DefaultNamespace, Type: "sysbatch", Priority: 50,
		Periodic:   &structs.PeriodicConfig{Enabled: true, Spec: spec, ProhibitOverlap: overlap},
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}}}}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.idx++
	if err := f.st.UpsertJob(f.idx, j); err != nil {
		f.t.Fatal(err)
	}
	if !last.IsZero() {
		if err := f.st.UpsertPeriodicLaunch(f.idx, &structs.PeriodicLaunch{ID: id, Namespace: j.Namespace, Launch: last}); err != nil {
			f.t.Fatal(err)
		}
	}
	stored, err := f.st.JobByID(nil, j.Namespace, id)
	if err != nil || stored == nil {
		f.t.Fatalf("stored job %s: %v", id, err)
	}
	return stored
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, 10*time.Second, what, cond)
}

var t0 = time.Date(2030, 1, 1, 10, 30, 0, 0, time.UTC)

func child(id string, at time.Time) string { return fmt.Sprintf("%s/periodic-%d", id, at.Unix()) }

// Restore tracks the active periodic jobs and launches once, at the
// clock's time, for each that missed a launch while no leader ran.
func TestRestoreCatchesUp(t *testing.T) {
	f := newFixture(t, t0)
	f.job("missed", "0 * * * *", false, t0.Add(-90*time.Minute)) // 09:00 last; 10:00 missed
	f.job("ontime", "0 * * * *", false, t0.Add(-30*time.Minute))
	f.job("new", "0 * * * *", false, time.Time{})
	off := f.job("off", "0 * * * *", false, t0.Add(-5*time.Hour))
	off.Periodic.Enabled = false
	f.idx++
	if err := f.st.UpsertJob(f.idx, off); err != nil {
		t.Fatal(err)
	}
	if err := f.d.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := f.children(); len(got) != 1 || got[0] != child("missed", t0) {
		t.Fatalf("catch-up launches %v, want only missed's at the clock's time", got)
	}
	for _, id := range []string{"missed", "ontime", "new"} {
		if n := f.d.NextLaunch(structs.DefaultNamespace, id); !n.Equal(time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC)) {
			t.Errorf("%s next launch %s, want 11:00", id, n)
		}
	}
	if !f.d.NextLaunch(structs.DefaultNamespace, "off").IsZero() {
		t.Error("a disabled periodic job is tracked")
	}
}

// The FSM's reports only count while enabled: between Restore and
// Disable.
func TestJobChangesWhileEnabled(t *testing.T) {
	f := newFixture(t, t0)
	j := f.job("j", "0 * * * *", false, time.Time{})
	f.d.JobChanged(j)
	if !f.d.NextLaunch(j.Namespace, j.ID).IsZero() {
		t.Fatal("a disabled dispatcher tracked a job")
	}
	if err := f.d.Restore(); err != nil {
		t.Fatal(err)
	}
	other := j.Copy()
	other.ID = "k"
	other.Periodic.Spec = "30 * * * *"
	f.d.JobChanged(other)
	if n := f.d.NextLaunch(j.Namespace, "k"); !n.Equal(t0.Add(time.Hour)) {
		t.Fatalf("k next %s, want 11:30", n)
	}
	stopped := other.Copy()
	stopped.Stop = true
	f.d.JobChanged(stopped)
	if !f.d.NextLaunch(j.Namespace, "k").IsZero() {
		t.Fatal("a stopped job is still tracked")
	}
	f.d.JobRemoved(j.Namespace, j.ID)
	if !f.d.NextLaunch(j.Namespace, j.ID).IsZero() {
		t.Fatal("a removed job is still tracked")
	}
	f.d.JobChanged(j)
	f.d.Disable()
	if !f.d.NextLaunch(j.Namespace, j.ID).IsZero() {
		t.Fatal("Disable kept a job")
	}
}

// Run launches what is due when the clock reaches it, names the child
// after its scheduled time, skips a launch while an earlier child runs if
// the job prohibits overlap, and stops (disabled) with its context.
func TestRunLaunchesOnTheClock(t *testing.T) {
	f := newFixture(t, t0)
	f.job("free", "0 * * * *", false, time.Time{})
	f.job("po", "0 * * * *", true, time.Time{})
	if err := f.d.Restore(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.d.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	eleven, twelve := time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	f.clock.Set(eleven.Add(5 * time.Second))
	f.d.Wake()
	waitFor(t, "the 11:00 launches", func() bool { return len(f.children()) == 2 })
	waitFor(t, "next launches at 12:00", func() bool {
		return f.d.NextLaunch(structs.DefaultNamespace, "free").Equal(twelve) && f.d.NextLaunch(structs.DefaultNamespace, "po").Equal(twelve)
	})
	want := map[string]bool{child("free", eleven): true, child("po", eleven): true}
	for _, c := range f.children() {
		if !want[c] {
			t.Fatalf("launched %v, want %v", f.children(), want)
		}
	}

	// 12:00: po's 11:00 child still has a pending eval, so po is skipped.
	f.clock.Set(twelve.Add(time.Second))
	f.d.Wake()
	waitFor(t, "the 12:00 launch of free", func() bool { return len(f.children()) == 3 })
	waitFor(t, "po's 12:00 launch consumed", func() bool {
		return f.d.NextLaunch(structs.DefaultNamespace, "po").Equal(twelve.Add(time.Hour))
	})
	if c := f.children()[2]; c != child("free", twelve) {
		t.Fatalf("third launch %s, want free's 12:00", c)
	}
	if j, _ := f.st.JobByID(nil, structs.DefaultNamespace, child("po", twelve)); j != nil {
		t.Fatal("po launched over its running child")
	}

	cancel()
	<-done
	if !f.d.NextLaunch(structs.DefaultNamespace, "free").IsZero() {
		t.Fatal("Run ended without disabling the dispatcher")
	}
}

// Force ignores prohibit_overlap and takes the next free second when a
// child of this instant exists; an unforced launch of an existing instant
// is skipped.
func TestForce(t *testing.T) {
	f := newFixture(t, t0)
	po := f.job("po", "0 * * * *", true, time.Time{})
	ev, idx, err := f.d.Force(po, t0)
	if err != nil || ev == nil || idx == 0 || ev.JobID != child("po", t0) {
		t.Fatalf("first force: %+v %d %v", ev, idx, err)
	}
	ev, _, err = f.d.Force(po, t0)
	if err != nil || ev == nil || ev.JobID != child("po", t0.Add(time.Second)) {
		t.Fatalf("second force in the same second: %+v %v", ev, err)
	}
	free := f.job("free", "0 * * * *", false, time.Time{})
	if ev, _, err := f.d.launch(free, t0, false); err != nil || ev == nil {
		t.Fatalf("launch: %+v %v", ev, err)
	}
	if ev, idx, err := f.d.launch(free, t0, false); err != nil || ev != nil || idx != 0 {
		t.Fatalf("a second launch of one instant: %+v %d %v, want skipped", ev, idx, err)
	}
	if ev, _, err := f.d.launch(po, t0.Add(time.Hour), false); err != nil || ev != nil {
		t.Fatalf("an overlapping launch: %+v %v, want skipped", ev, err)
	}
	if n := len(f.children()); n != 3 {
		t.Fatalf("%d children, want 3", n)
	}
}

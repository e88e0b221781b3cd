package worker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/internal/testwait"
	"github.com/drover-org/drover/sdk/scheduler"
)

// typedBroker hands out the first eval a worker admits and counts the
// workers waiting in DequeueFunc; the evals taken are recorded by ID.
type typedBroker struct {
	mu      sync.Mutex
	evals   []*structs.Evaluation
	taken   []string
	waiting int
}

func (b *typedBroker) DequeueFunc(ctx context.Context, admit func(string) bool) (*structs.Evaluation, string, error) {
	b.mu.Lock()
	for i, ev := range b.evals {
		if admit(ev.Type) {
			b.evals = slices.Delete(b.evals, i, i+1)
			b.taken = append(b.taken, ev.ID)
			b.mu.Unlock()
			return ev, "t", nil
		}
	}
	b.waiting++
	b.mu.Unlock()
	<-ctx.Done()
	b.mu.Lock()
	b.waiting--
	b.mu.Unlock()
	return nil, "", ctx.Err()
}

func (b *typedBroker) state() (waiting int, taken []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting, slices.Clone(b.taken)
}

func (*typedBroker) Ack(string, string) error                    { return nil }
func (*typedBroker) Nack(string, string) error                   { return nil }
func (*typedBroker) Requeue(string, string, time.Duration) error { return nil }
func (*typedBroker) PauseNackTimeout(string, string) error       { return nil }
func (*typedBroker) ResumeNackTimeout(string, string) error      { return nil }
func (twoTypes) Lookup(string) (scheduler.Scheduler, int, error) { return nil, 0, errors.New("none") }
func (twoTypes) ServedTypes() []string                           { return []string{"batch", "service"} }

type twoTypes struct{}

// runPool runs p until the test ends and checks Run returns.
func runPool(t *testing.T, p *Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
}

func newTestPool(t *testing.T, b Broker, workers int) *Pool {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{
		Workers: workers, Broker: b, Schedulers: twoTypes{},
		Snapshot: func(context.Context, uint64) (*state.StateSnapshot, error) { return st.Snapshot() },
		State:    func() *state.StateStore { return st },
	})
}

// Reconfigure refuses what Nomad refuses (a negative count, a list
// without "_core", a type no plugin serves) and what drover bounds, with
// ErrInvalid naming the field, and changes nothing then.
func TestReconfigureRefuses(t *testing.T) {
	many := make([]string, maxEnabled+1)
	for i := range many {
		many[i] = "_core"
	}
	cases := []struct {
		name    string
		num     int
		enabled []string
		field   string
	}{
		{"negative count", -1, []string{"_core", "batch"}, "num_schedulers"},
		{"too many workers", MaxWorkers + 1, []string{"_core"}, "num_schedulers"},
		{"no list", 2, nil, "enabled_schedulers"},
		{"no _core", 2, []string{"batch"}, "enabled_schedulers"},
		{"unserved type", 2, []string{"_core", "system"}, "enabled_schedulers"},
		{"list too long", 2, many, "enabled_schedulers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestPool(t, &typedBroker{}, 3)
			err := p.Reconfigure(tc.num, tc.enabled)
			if !errors.Is(err, structs.ErrInvalid) || !strings.HasPrefix(err.Error(), tc.field+":") {
				t.Fatalf("Reconfigure(%d, %v) = %v; want ErrInvalid naming %s", tc.num, tc.enabled, err, tc.field)
			}
			if p.Workers() != 3 || p.Enabled() != nil {
				t.Errorf("after the refusal: %d workers, enabled %v; want 3 and every type", p.Workers(), p.Enabled())
			}
		})
	}
}

// At run time the pool grows and shrinks to the count asked, 0 included
// (the removed workers stop: none is left waiting on the broker), and a
// list of types replaces every worker by workers taking only those; a list
// of every served type means every type again. goleak (TestMain) checks
// that no worker outlives Run.
func TestReconfigureAtRunTime(t *testing.T) {
	b := &typedBroker{evals: []*structs.Evaluation{
		{ID: "s1", Namespace: "default", JobID: "j", Type: "service", Status: structs.EvalStatusPending},
		{ID: "b1", Namespace: "default", JobID: "j", Type: "batch", Status: structs.EvalStatusPending},
	}}
	p := newTestPool(t, b, 2)
	// Before Run: sets what Run starts.
	if err := p.Reconfigure(1, []string{"_core", "batch"}); err != nil {
		t.Fatal(err)
	}
	runPool(t, p)
	waitPool := func(what string, workers, waiting int, taken ...string) {
		t.Helper()
		testwait.For(t, 20*time.Second, what, func() bool {
			w, got := b.state()
			return len(p.Info()) == workers && w == waiting && slices.Equal(got, taken)
		})
	}
	waitPool("one batch worker that took b1 only", 1, 1, "b1")
	if n, en := p.Workers(), p.Enabled(); n != 1 || !slices.Equal(en, []string{"_core", "batch"}) {
		t.Errorf("config %d %v; want 1 [_core batch]", n, en)
	}

	steps := []struct {
		name    string
		num     int
		enabled []string
		workers int
		taken   []string
	}{
		{"grow to three, same types", 3, []string{"batch", "_core"}, 3, []string{"b1"}},
		{"zero workers", 0, []string{"_core", "batch"}, 0, []string{"b1"}},
		{"every type again", 2, []string{"_core", "service", "batch", "_core"}, 2, []string{"b1", "s1"}},
		{"shrink to one", 1, []string{"_core", "batch", "service"}, 1, []string{"b1", "s1"}},
	}
	for _, st := range steps {
		if err := p.Reconfigure(st.num, st.enabled); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		waitPool(st.name, st.workers, st.workers, st.taken...)
		for _, in := range p.Info() {
			if in.Status != StatusStarted {
				t.Errorf("%s: worker %+v not started", st.name, in)
			}
		}
	}
	if p.Enabled() != nil {
		t.Errorf("Enabled after a list of every served type = %v; want nil (every type)", p.Enabled())
	}
	ids := map[string]bool{}
	for _, in := range p.Info() {
		ids[in.ID] = true
	}
	if ids["0"] {
		t.Errorf("workers %v; the first worker (0) was replaced when the types changed", ids)
	}
}

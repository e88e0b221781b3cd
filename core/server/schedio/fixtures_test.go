package schedio

import (
	"testing"

	"github.com/drover-org/drover/core/server/internal/servertest"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// testNode is servertest.Node.
func testNode(name string) *structs.Node { return servertest.Node(name) }

// testJob is servertest.Job without a type declaration.
func testJob(id, typ string) *structs.Job { return servertest.Job(id, typ, nil) }

// fixture is a state store written one index at a time.
type fixture struct {
	t   *testing.T
	st  *state.StateStore
	idx uint64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, st: st, idx: 100}
}

func (f *fixture) next() uint64 { f.idx++; return f.idx }

func (f *fixture) nodes(ns ...*structs.Node) {
	f.t.Helper()
	for _, n := range ns {
		if err := f.st.UpsertNode(f.next(), n); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) jobs(js ...*structs.Job) {
	f.t.Helper()
	for _, j := range js {
		if err := f.st.UpsertJob(f.next(), j); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) allocs(as ...*structs.Allocation) {
	f.t.Helper()
	if err := f.st.UpsertAllocs(f.next(), as); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) evals(es ...*structs.Evaluation) {
	f.t.Helper()
	if err := f.st.UpsertEvals(f.next(), es); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) snapshot() *state.StateSnapshot {
	f.t.Helper()
	snap, err := f.st.Snapshot()
	if err != nil {
		f.t.Fatal(err)
	}
	return snap
}

// The state store serves every view this package reads: the worker passes
// a snapshot, the plan endpoint and the explanation the live store.
var (
	_ RequestState = (*state.StateSnapshot)(nil)
	_ PlanState    = (*state.StateSnapshot)(nil)
	_ ExplainState = (*state.StateStore)(nil)
)

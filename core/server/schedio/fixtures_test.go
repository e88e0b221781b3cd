package schedio

import (
	"testing"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// testNode is a linux node with room for a few allocs and raw_exec.
func testNode(name string) *structs.Node {
	return &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: name, Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": name},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk: structs.NodeDiskResources{DiskMB: 100000},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
	}
}

// testJob is a one-group job of type typ, declaring no type behaviour.
func testJob(id, typ string) *structs.Job {
	return &structs.Job{
		ID: id, Type: typ, Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 64}}},
		}},
	}
}

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

package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state/persist"
	"github.com/drover-org/drover/core/structs"
)

// The stream header, and the two record types of core/state/persist that
// TestRestoreRejectsBadSnapshots writes by hand (record types never change).
const (
	snapshotMagic   = persist.Magic
	snapshotVersion = persist.Version

	recAlloc byte = 8
	recEnd   byte = 255
)

// roundTrip persists a snapshot of s and restores it into a new store.
func roundTrip(t testing.TB, s *StateStore) *StateStore {
	t.Helper()
	snap, err := s.Snapshot()
	must(t, err)
	var buf bytes.Buffer
	must(t, snap.Persist(&buf))
	out := testStore(t)
	must(t, out.Restore(&buf))
	return out
}

// dump renders every table (and each table's index) as JSON so that two
// stores can be compared for equal contents.
func dump(t testing.TB, s *StateStore) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(name string, v any, err error) {
		t.Helper()
		must(t, err)
		b, err := json.Marshal(v)
		must(t, err)
		out[name] = string(b)
	}
	jobs, err := s.Jobs(nil)
	add("jobs", jobs, err)
	var versions []*structs.Job
	for _, j := range jobs {
		v, err := s.JobVersionsByID(nil, j.Namespace, j.ID)
		must(t, err)
		versions = append(versions, v...)
	}
	add("versions", versions, nil)
	sums, err := s.JobSummaries(nil)
	add("summaries", sums, err)
	allocs, err := s.Allocs(nil)
	add("allocs", allocs, err)
	evals, err := s.Evals(nil)
	add("evals", evals, err)
	nodes, err := s.Nodes(nil)
	add("nodes", nodes, err)
	launches, err := s.PeriodicLaunches(nil)
	add("launches", launches, err)
	idx, cfg, err := s.SchedulerConfig()
	add("config", []any{idx, cfg}, err)
	for _, table := range []string{TableIndex, TableNodes, TableJobs, TableJobVersions, TableJobSummary, TableEvals, TableAllocs, TablePeriodicLaunch, TableSchedulerConfig} {
		out["index:"+table] = fmt.Sprint(s.Index(table))
	}
	return out
}

// populate fills a store with one of everything.
func populate(t testing.TB, s *StateStore) {
	t.Helper()
	node := mockNode()
	must(t, s.UpsertNode(10, node))
	must(t, s.UpdateNodeDrain(11, node.ID, &structs.DrainStrategy{DrainSpec: structs.DrainSpec{Deadline: time.Minute}}, false, 5, nil))
	job := mockJob("service")
	must(t, s.UpsertJob(12, job))
	must(t, s.UpsertJob(13, job.Copy()))
	stored, _ := s.JobByID(nil, job.Namespace, job.ID)
	parent := storedJob(t, s, 14, mockPeriodic())
	must(t, s.UpsertJob(15, mockChild(parent, 1700000000)))
	must(t, s.UpsertPeriodicLaunch(16, &structs.PeriodicLaunch{ID: parent.ID, Namespace: parent.Namespace, Launch: time.Unix(1700000000, 0).UTC()}))
	ev := mockEval(stored, structs.EvalStatusComplete)
	ev.QueuedAllocations = map[string]int{"web": 0}
	must(t, s.UpsertEvals(17, []*structs.Evaluation{ev, mockEval(stored, structs.EvalStatusBlocked)}))
	a1, a2 := mockAlloc(stored, node.ID), mockAlloc(stored, node.ID)
	a2.Job, _ = s.JobByIDAndVersion(nil, job.Namespace, job.ID, 0) // an older version
	must(t, s.UpsertAllocs(18, []*structs.Allocation{a1, a2}))
	must(t, s.UpdateAllocsFromClient(19, []*structs.Allocation{{ID: a1.ID, ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning, Events: []*structs.TaskEvent{{Type: structs.TaskStarted, Time: 42}}}}}}))
	must(t, s.SchedulerSetConfig(20, &structs.SchedulerConfiguration{SchedulerAlgorithm: "spread"}))
}

func TestPersistRestoreRoundTrip(t *testing.T) {
	s := testStore(t)
	populate(t, s)
	restored := roundTrip(t, s)
	want, got := dump(t, s), dump(t, restored)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s differs after restore:\n got %s\nwant %s", k, got[k], w)
		}
	}
	if restored.LatestIndex() != 20 {
		t.Errorf("restored LatestIndex = %d, want 20", restored.LatestIndex())
	}
	// Allocations that shared a job object still do; one of another
	// version keeps its own.
	allocs, _ := restored.Allocs(nil)
	jobs := map[*structs.Job]int{}
	for _, a := range allocs {
		jobs[a.Job]++
	}
	if len(jobs) != 2 {
		t.Errorf("restored allocs point at %d job objects, want 2", len(jobs))
	}
	// The restored store is fully writable.
	must(t, restored.UpsertNode(21, mockNode()))
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	s := testStore(t)
	populate(t, s)
	snap, _ := s.Snapshot()
	var buf bytes.Buffer
	must(t, snap.Persist(&buf))
	good := buf.Bytes()

	badVersion := append([]byte(nil), good...)
	badVersion[len(snapshotMagic)] = 99
	// A well-formed stream whose alloc row cannot be inserted (no ID).
	noID := append([]byte(snapshotMagic), snapshotVersion, recAlloc, 2, '{', '}', recEnd, 0)
	unknown := append([]byte(snapshotMagic), snapshotVersion, 77, 2, '{', '}', recEnd, 0)
	cases := map[string][]byte{
		"row without ID":      noID,
		"unknown record type": unknown,
		"empty":               nil,
		"wrong magic":         append([]byte("NOTASNAP"), good[len(snapshotMagic):]...),
		"wrong version":       badVersion,
		"truncated":           good[:len(good)/2],
		"no end record":       good[:len(good)-2],
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			fresh := testStore(t)
			err := fresh.Restore(bytes.NewReader(data))
			if err == nil || (name != "row without ID" && !errors.Is(err, ErrBadSnapshot)) {
				t.Fatalf("err = %v, want ErrBadSnapshot", err)
			}
			if fresh.LatestIndex() != 0 {
				t.Error("a failed restore left partial state behind")
			}
		})
	}
}

// BenchmarkPersistRestore100kAllocs persists and restores a state of
// 100,000 allocations of 100 jobs on 1,000 nodes.
func BenchmarkPersistRestore100kAllocs(b *testing.B) {
	s := testStore(b)
	index := uint64(1)
	var nodes []*structs.Node
	for i := 0; i < 1000; i++ {
		n := mockNode()
		must(b, s.UpsertNode(index, n))
		nodes = append(nodes, n)
		index++
	}
	for j := 0; j < 100; j++ {
		job := storedJob(b, s, index, mockJob("batch"))
		index++
		allocs := make([]*structs.Allocation, 0, 1000)
		for i := 0; i < 1000; i++ {
			a := mockAlloc(job, nodes[i].ID)
			a.ClientStatus = structs.AllocClientStatusRunning
			a.TaskStates = map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning, StartedAt: time.Now()}}
			allocs = append(allocs, a)
		}
		must(b, s.UpsertAllocs(index, allocs))
		index++
	}
	snap, err := s.Snapshot()
	must(b, err)
	var encoded bytes.Buffer
	must(b, snap.Persist(&encoded))
	b.Run("persist", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var buf bytes.Buffer
			must(b, snap.Persist(&buf))
			b.ReportMetric(float64(buf.Len())/(1<<20), "MB")
		}
	})
	b.Run("restore", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			out := testStore(b)
			must(b, out.Restore(bytes.NewReader(encoded.Bytes())))
			if got, _ := out.Allocs(nil); len(got) != 100000 {
				b.Fatalf("restored %d allocs", len(got))
			}
		}
	})
}

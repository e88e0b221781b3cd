package fsm

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/drover-org/drover/core/structs"
)

func nestedList(depth int) any {
	var v any = "leaf"
	for i := 0; i < depth; i++ {
		v = []any{v}
	}
	return v
}

// deepJob is a job whose task config nests depth levels of lists, as the
// report's job did (about 1,100).
func deepJob(depth int) *structs.Job {
	j := mockJob("batch")
	j.Canonicalize()
	j.TaskGroups[0].Tasks[0].Config = map[string]any{"args": nestedList(depth)}
	return j
}

func encodeOrFail(t testing.TB, typ structs.MessageType, msg any) []byte {
	t.Helper()
	buf, err := Encode(typ, msg)
	must(t, err)
	return buf
}

// TestApplyStopsAtBadEntry: a committed entry the FSM cannot apply stops it
// with one error naming the index and type, told once to the fatal handler;
// no panic, no state written, later entries refused, and no snapshot that
// would let a restart skip the entry.
func TestApplyStopsAtBadEntry(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		wantType string
	}{
		{"job nested past the decoder's depth", encodeOrFail(t, structs.JobRegisterRequestType,
			&structs.JobRegisterRequest{Job: deepJob(1100)}), "JobRegister"},
		{"truncated payload", encodeOrFail(t, structs.NodeRegisterRequestType,
			&structs.NodeRegisterRequest{Node: mockNode()})[:20], "NodeRegister"},
		{"unknown type", []byte{127, 0x80}, "MessageType(127)"},
		{"empty", []byte{}, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := testFSM(t)
			var mu sync.Mutex
			var fatal []error
			f.SetFatalHandler(func(err error) { mu.Lock(); fatal = append(fatal, err); mu.Unlock() })
			mustApply(t, f, 5, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()})

			resp := f.Apply(&raft.Log{Index: 17, Type: raft.LogCommand, Data: tc.data})
			err, ok := resp.(error)
			if !ok || err == nil {
				t.Fatalf("response = %v, want an error", resp)
			}
			for _, want := range []string{"index 17", "type " + tc.wantType} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			// A later good entry is refused: applying past the bad one
			// would diverge from the servers that stopped.
			if resp := apply(t, f, 18, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: mockNode()}); resp != err {
				t.Errorf("entry after the bad one: response %v, want the stop error", resp)
			}
			if got := f.State().LatestIndex(); got != 5 {
				t.Errorf("state index %d, want 5 (the last good entry)", got)
			}
			if _, serr := f.Snapshot(); serr == nil {
				t.Error("a stopped FSM took a snapshot")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(fatal) != 1 || fatal[0] != err {
				t.Errorf("fatal handler calls = %v, want exactly the stop error", fatal)
			}
		})
	}
}

// TestCheckEntry: the check the server runs before proposing an entry
// refuses exactly what Apply could not decode.
func TestCheckEntry(t *testing.T) {
	planWith := func(depth int) *structs.ApplyPlanResultsRequest {
		job := deepJob(depth)
		a := mockAlloc(job, "n1")
		a.Job = job
		return &structs.ApplyPlanResultsRequest{Job: job, AllocsUpdated: []*structs.Allocation{a}}
	}
	cases := []struct {
		name string
		data []byte
		ok   bool
	}{
		{"job register", encodeOrFail(t, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: mockJob("batch")}), true},
		// The deepest config the edge accepts still decodes in the
		// deepest entry it travels in.
		{"plan result with the deepest accepted config", encodeOrFail(t, structs.ApplyPlanResultsRequestType, planWith(structs.MaxNestingDepth)), true},
		{"job nested as in the report", encodeOrFail(t, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: deepJob(1100)}), false},
		{"job just past the decode depth", encodeOrFail(t, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: deepJob(structs.MaxDecodeDepth)}), false},
		{"flagged unknown type", []byte{byte(structs.IgnoreUnknownTypeFlag | 127), 0x80}, true},
		{"unknown type", []byte{127, 0x80}, false},
		{"garbage", []byte{byte(structs.EvalUpdateRequestType), 0xc1}, false},
		{"empty", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckEntry(tc.data)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckEntry = %v, want ok=%v", err, tc.ok)
			}
			// Apply agrees with the check.
			f, _ := testFSM(t)
			f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: tc.data})
			if (f.Failed() == nil) != tc.ok {
				t.Errorf("Apply stopped = %v, CheckEntry ok = %v", f.Failed(), tc.ok)
			}
		})
	}
}

func TestCheckersCoverAppliers(t *testing.T) {
	a := slices.Sorted(maps.Keys(appliers))
	c := slices.Sorted(maps.Keys(checkers))
	if !slices.Equal(a, c) {
		t.Fatalf("checkers %v, appliers %v", c, a)
	}
}

// BenchmarkCheckEntryPlan measures the server's pre-commit check on the
// largest entries, a node scheduler's plan over many nodes, against the
// encoding the server does anyway.
func BenchmarkCheckEntryPlan(b *testing.B) {
	job := mockJob("batch")
	job.Canonicalize()
	req := &structs.ApplyPlanResultsRequest{Job: job, PlacementMetric: &structs.AllocMetric{}}
	for i := 0; i < 10000; i++ {
		a := mockAlloc(job, "node-"+strings.Repeat("x", 30))
		a.Resources = &structs.Resources{CPU: 100, MemoryMB: 64}
		req.AllocsUpdated = append(req.AllocsUpdated, a)
	}
	buf := encodeOrFail(b, structs.ApplyPlanResultsRequestType, req)
	b.Run("encode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			encodeOrFail(b, structs.ApplyPlanResultsRequestType, req)
		}
	})
	b.Run("check", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := CheckEntry(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(len(buf)), "entry-bytes")
}

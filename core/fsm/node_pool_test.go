package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func poolNames(t *testing.T, f *FSM) []string {
	t.Helper()
	all, err := f.State().NodePools(nil, "")
	must(t, err)
	out := make([]string, 0, len(all))
	for _, p := range all {
		out = append(out, p.Name)
	}
	return out
}

// Node pool entries apply all or nothing; a refused entry answers with an
// error of the right kind, leaves the state as it was and never stops the
// FSM. A node registering into a missing pool creates it.
func TestFSM_NodePoolEntries(t *testing.T) {
	f, _ := testFSM(t)
	job := mockJob("service")
	job.NodePool = "busy"
	node := mockNode()
	node.NodePool = "auto"

	steps := []struct {
		name    string
		typ     structs.MessageType
		msg     any
		wantErr error
		want    []string // pool names afterwards
	}{
		{"built-ins only", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "a"}}}, nil, []string{"a", "all", "default"}},
		{"upsert busy", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "busy"}, {Name: "b_2"}}}, nil, []string{"a", "all", "b_2", "busy", "default"}},
		{"upsert with one invalid", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "c"}, {Name: "bad name!"}}}, structs.ErrInvalid, []string{"a", "all", "b_2", "busy", "default"}},
		{"upsert all", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "c"}, {Name: "all", Description: "x"}}}, structs.ErrInvalid, []string{"a", "all", "b_2", "busy", "default"}},
		{"upsert default", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "default", Description: "x"}}}, structs.ErrInvalid, []string{"a", "all", "b_2", "busy", "default"}},
		{"job in busy", structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job, RequireNodePool: true}, nil, []string{"a", "all", "b_2", "busy", "default"}},
		{"node in auto", structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: node}, nil, []string{"a", "all", "auto", "b_2", "busy", "default"}},
		{"delete default", structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"a", "default"}}, structs.ErrInvalid, []string{"a", "all", "auto", "b_2", "busy", "default"}},
		{"delete all", structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"all"}}, structs.ErrInvalid, []string{"a", "all", "auto", "b_2", "busy", "default"}},
		{"delete with jobs", structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"a", "busy"}}, structs.ErrInvalid, []string{"a", "all", "auto", "b_2", "busy", "default"}},
		{"delete with nodes", structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"a", "auto"}}, structs.ErrInvalid, []string{"a", "all", "auto", "b_2", "busy", "default"}},
		{"delete missing", structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"a", "nope"}}, structs.ErrNotFound, []string{"a", "all", "auto", "b_2", "busy", "default"}},
		{"delete a", structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"a"}}, nil, []string{"all", "auto", "b_2", "busy", "default"}},
		{"job in the deleted pool", structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: func() *structs.Job { j := mockJob("service"); j.NodePool = "a"; return j }(), RequireNodePool: true}, structs.ErrInvalid, []string{"all", "auto", "b_2", "busy", "default"}},
		{"update busy", structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "busy", Description: "d"}}}, nil, []string{"all", "auto", "b_2", "busy", "default"}},
	}
	for i, st := range steps {
		resp := apply(t, f, uint64(i+1), st.typ, st.msg)
		switch {
		case st.wantErr == nil && resp != nil:
			t.Fatalf("%s: %v", st.name, resp)
		case st.wantErr != nil:
			err, _ := resp.(error)
			if err == nil || !errors.Is(err, st.wantErr) {
				t.Fatalf("%s: response %v, want an error of kind %v", st.name, resp, st.wantErr)
			}
		}
		if f.Failed() != nil {
			t.Fatalf("%s: FSM stopped: %v", st.name, f.Failed())
		}
		if got := poolNames(t, f); !sameNames(got, st.want...) {
			t.Fatalf("%s: pools %v, want %v", st.name, got, st.want)
		}
	}
	busy, err := f.State().NodePoolByName(nil, "busy")
	must(t, err)
	if busy.CreateIndex != 2 || busy.ModifyIndex != uint64(len(steps)) || busy.Description != "d" {
		t.Errorf("busy after update %+v, want CreateIndex 2, ModifyIndex %d, Description d", busy, len(steps))
	}
	if all, _ := f.State().NodePoolByName(nil, "all"); all == nil || all.Description == "x" {
		t.Errorf("all pool %+v", all)
	}
	jobs, err := f.State().JobsByNamespace(nil, structs.DefaultNamespace)
	must(t, err)
	if len(jobs) != 1 {
		t.Errorf("%d jobs stored, want the one in busy alone", len(jobs))
	}
	// A stopped job no longer holds its pool.
	stopped := job.Copy()
	stopped.Stop = true
	mustApply(t, f, 100, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: stopped})
	mustApply(t, f, 101, structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"busy"}})
}

func TestFSM_NodePoolCheckEntry(t *testing.T) {
	good, err := Encode(structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "a"}}})
	must(t, err)
	if err := CheckEntry(good); err != nil {
		t.Errorf("good upsert: %v", err)
	}
	withNil, err := Encode(structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "a"}, nil}})
	must(t, err)
	if err := CheckEntry(withNil); err == nil {
		t.Error("upsert with a nil pool passed CheckEntry")
	}
	if typeName(structs.NodePoolUpsertRequestType) != "NodePoolUpsert" || typeName(structs.NodePoolDeleteRequestType) != "NodePoolDelete" {
		t.Errorf("type names %q, %q", typeName(structs.NodePoolUpsertRequestType), typeName(structs.NodePoolDeleteRequestType))
	}
	f, _ := testFSM(t)
	resp := apply(t, f, 1, structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "a"}, nil}})
	if err, _ := resp.(error); err == nil || !errors.Is(err, structs.ErrInvalid) || f.Failed() != nil {
		t.Fatalf("nil pool: response %v, FSM %v", resp, f.Failed())
	}
}

func TestFSM_NodePoolSnapshotRoundTrip(t *testing.T) {
	f, _ := testFSM(t)
	on := true
	mustApply(t, f, 1, structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{
		{Name: "gpu", Description: "GPUs", Meta: map[string]string{"team": "ml"},
			SchedulerConfiguration: &structs.NodePoolSchedulerConfiguration{SchedulerAlgorithm: "spread", MemoryOversubscriptionEnabled: &on}},
		{Name: "dev"},
	}})
	mustApply(t, f, 2, structs.NodePoolUpsertRequestType, &structs.NodePoolUpsertRequest{NodePools: []*structs.NodePool{{Name: "dev", Description: "x"}}})

	data := snapshotBytes(t, f)
	dst, _ := testFSM(t)
	must(t, dst.Restore(io.NopCloser(bytes.NewReader(data))))
	if got := poolNames(t, dst); !sameNames(got, "all", "default", "dev", "gpu") {
		t.Fatalf("pools after restore %v", got)
	}
	gpu, err := dst.State().NodePoolByName(nil, "gpu")
	must(t, err)
	if gpu.Description != "GPUs" || gpu.Meta["team"] != "ml" || gpu.CreateIndex != 1 || gpu.ModifyIndex != 1 ||
		gpu.SchedulerConfiguration == nil || gpu.SchedulerConfiguration.SchedulerAlgorithm != "spread" ||
		gpu.SchedulerConfiguration.MemoryOversubscriptionEnabled == nil || !*gpu.SchedulerConfiguration.MemoryOversubscriptionEnabled {
		t.Errorf("gpu after restore %+v", gpu)
	}
	dev, err := dst.State().NodePoolByName(nil, "dev")
	must(t, err)
	if dev.Description != "x" || dev.CreateIndex != 1 || dev.ModifyIndex != 2 {
		t.Errorf("dev after restore %+v", dev)
	}
	mustApply(t, dst, 3, structs.NodePoolDeleteRequestType, &structs.NodePoolDeleteRequest{Names: []string{"dev"}})
	if got := poolNames(t, dst); !sameNames(got, "all", "default", "gpu") {
		t.Errorf("pools after delete on the restored store %v", got)
	}
}

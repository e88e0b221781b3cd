package schedio

import (
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// TestScheduleInputHostVolumes: each node of the request carries the host
// volumes the job's groups ask for (per_alloc: one per index below the
// count), with their read_only, and none of the others.
func TestScheduleInputHostVolumes(t *testing.T) {
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	idx := uint64(100)
	next := func() uint64 { idx++; return idx }
	n1, n2, n3 := testNode("a"), testNode("b"), testNode("c")
	n1.HostVolumes = map[string]*structs.ClientHostVolumeConfig{
		"shared": {Name: "shared", Path: "/srv/shared"}, "pa[1]": {Name: "pa[1]", Path: "/srv/pa1"}, "unrelated": {Name: "unrelated", Path: "/x"},
	}
	n2.HostVolumes = map[string]*structs.ClientHostVolumeConfig{"shared": {Name: "shared", Path: "/srv/shared", ReadOnly: true}, "pa[7]": {Path: "/y"}}
	for _, n := range []*structs.Node{n1, n2, n3} {
		n.Status, n.SchedulingEligibility, n.NodePool = structs.NodeStatusReady, structs.NodeSchedulingEligible, "default"
		if err := st.UpsertNode(next(), n); err != nil {
			t.Fatal(err)
		}
	}
	job := testJob("db", "batch")
	job.Namespace, job.NodePool = "default", "default"
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"d": {Name: "d", Type: structs.VolumeTypeHost, Source: "shared"}}
	pa := testJob("db", "batch").TaskGroups[0]
	pa.Name, pa.Count = "pa", 2
	pa.Volumes = map[string]*structs.VolumeRequest{"p": {Name: "p", Type: structs.VolumeTypeHost, Source: "pa", PerAlloc: true}}
	job.TaskGroups = append(job.TaskGroups, pa)

	snap, err := st.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ev := &structs.Evaluation{ID: "ev", Namespace: "default", JobID: job.ID, Type: job.Type, Priority: 50}
	req, err := BuildRequest(snap, NewNodeCache(), ev, job, 1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if v := req.GetJob().GetTaskGroups()[1].GetVolumes(); len(v) != 1 || v[0].GetType() != "host" || v[0].GetSource() != "pa" || !v[0].GetPerAlloc() {
		t.Fatalf("group pa volumes = %v", v)
	}
	got := map[string]map[string]bool{}
	for _, n := range req.GetNodes() {
		m := map[string]bool{}
		for name, v := range n.GetHostVolumes() {
			m[name] = v.GetReadOnly()
		}
		got[n.GetName()] = m
	}
	want := map[string]map[string]bool{"a": {"shared": false, "pa[1]": false}, "b": {"shared": true}, "c": {}}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Errorf("node %s host volumes = %v, want %v", name, g, w)
			continue
		}
		for k, ro := range w {
			if gro, ok := g[k]; !ok || gro != ro {
				t.Errorf("node %s host volumes = %v, want %v", name, g, w)
			}
		}
	}
}

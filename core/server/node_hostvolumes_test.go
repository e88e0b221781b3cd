package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

// A node's host volumes are bounded before they reach Raft: a refused
// registration names the field and writes nothing.
func TestNodeRegisterHostVolumeBounds(t *testing.T) {
	s := testServer(t, nil)
	before := s.State().LatestIndex()
	many := map[string]*structs.ClientHostVolumeConfig{}
	for i := range structs.MaxHostVolumesPerNode + 1 {
		many[strings.Repeat("v", 1+i%100)+string(rune('a'+i/100))] = &structs.ClientHostVolumeConfig{Path: "/srv"}
	}
	for _, tc := range []struct {
		name string
		vols map[string]*structs.ClientHostVolumeConfig
		want string
	}{
		{"bad name", map[string]*structs.ClientHostVolumeConfig{"a/b": {Path: "/srv"}}, `Node HostVolumes: name "a/b" must be`},
		{"relative path", map[string]*structs.ClientHostVolumeConfig{"data": {Path: "srv"}}, `Node HostVolumes "data": Path must be an absolute path`},
		{"null", map[string]*structs.ClientHostVolumeConfig{"data": nil}, `Node HostVolumes "data": null is not allowed`},
		{"name mismatch", map[string]*structs.ClientHostVolumeConfig{"data": {Name: "other", Path: "/srv"}}, `Name "other" does not match its key`},
		{"too many", many, "host volumes, more than 256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode("n1")
			n.HostVolumes = tc.vols
			_, err := s.Nodes().Register(context.Background(), n)
			if err == nil || structs.HTTPStatus(err) != 400 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Register: %.300v, want an invalid-request error containing %q", err, tc.want)
			}
		})
	}
	if after := s.State().LatestIndex(); after != before {
		t.Fatalf("refused registrations wrote to state: index %d -> %d", before, after)
	}
}

// A system job asking for a host volume is not placed on a node without
// it; when the node registers again with the volume (its agent restarted
// with a new host_volume block, quickly enough to stay ready), the job is
// placed there.
func TestNodeReregisterWithHostVolumePlacesSystemJob(t *testing.T) {
	s := testServer(t, nil)
	ctx := context.Background()
	job := testJob("sys", "system")
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Name: "data", Type: structs.VolumeTypeHost, Source: "shared"}}
	job.TaskGroups[0].Tasks[0].VolumeMounts = []*structs.VolumeMount{{Volume: "data", Destination: "/data"}}
	registerJob(t, s, job)
	n := testNode("a")
	if _, err := s.Nodes().Register(ctx, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the node's registration eval done", func() bool {
		evals, _ := s.State().EvalsByJob(nil, structs.DefaultNamespace, job.ID)
		for _, ev := range evals {
			if ev.NodeID == n.ID && ev.Status == structs.EvalStatusComplete {
				return true
			}
		}
		return false
	})
	if live := liveAllocsOn(t, s, "sys", n.ID); len(live) != 0 {
		t.Fatalf("placed %d allocs on a node without the host volume", len(live))
	}
	n2 := n.Copy()
	n2.HostVolumes = map[string]*structs.ClientHostVolumeConfig{"shared": {Name: "shared", Path: "/srv/shared"}}
	if _, err := s.Nodes().Register(ctx, n2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the system alloc on the node that now has the volume", func() bool {
		return len(liveAllocsOn(t, s, "sys", n.ID)) == 1
	})
}

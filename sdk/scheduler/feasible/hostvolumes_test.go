package feasible

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func TestHostVolumeChecker(t *testing.T) {
	hv := func(vols map[string]bool) *schedulerpb.Node {
		n := &schedulerpb.Node{Id: "n1", Drivers: []string{"exec"}}
		for name, ro := range vols {
			if n.HostVolumes == nil {
				n.HostVolumes = map[string]*schedulerpb.HostVolume{}
			}
			n.HostVolumes[name] = &schedulerpb.HostVolume{ReadOnly: ro}
		}
		return n
	}
	req := func(source string, readOnly, perAlloc bool) *schedulerpb.VolumeRequest {
		return &schedulerpb.VolumeRequest{Name: "v-" + source, Type: "host", Source: source, ReadOnly: readOnly, PerAlloc: perAlloc}
	}
	for _, tc := range []struct {
		name  string
		node  *schedulerpb.Node
		reqs  []*schedulerpb.VolumeRequest
		alloc string
		ok    bool
	}{
		{"present", hv(map[string]bool{"data": false}), []*schedulerpb.VolumeRequest{req("data", false, false)}, "", true},
		{"missing", hv(map[string]bool{"other": false}), []*schedulerpb.VolumeRequest{req("data", false, false)}, "", false},
		{"no host volumes", hv(nil), []*schedulerpb.VolumeRequest{req("data", true, false)}, "", false},
		{"read-only volume, read request", hv(map[string]bool{"data": true}), []*schedulerpb.VolumeRequest{req("data", true, false)}, "", true},
		{"read-only volume, write request", hv(map[string]bool{"data": true}), []*schedulerpb.VolumeRequest{req("data", false, false)}, "", false},
		{"one of two missing", hv(map[string]bool{"a": false}),
			[]*schedulerpb.VolumeRequest{req("a", false, false), req("b", false, false)}, "", false},
		{"per_alloc index 1", hv(map[string]bool{"data[1]": false}), []*schedulerpb.VolumeRequest{req("data", false, true)}, "j.g[1]", true},
		{"per_alloc index 0 missing", hv(map[string]bool{"data[1]": false}), []*schedulerpb.VolumeRequest{req("data", false, true)}, "j.g[0]", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := &schedulerpb.TaskGroup{Name: "g", Count: 2, Volumes: tc.reqs, Tasks: []*schedulerpb.Task{{Name: "t", Driver: "exec"}}}
			job := &schedulerpb.Job{Id: "j", Namespace: "default", TaskGroups: []*schedulerpb.TaskGroup{tg}}
			gc := NewGroupChain(job, tg, NewCache())
			if !gc.Escaped {
				t.Error("a group with host volumes must not share verdicts by computed class")
			}
			ok, reason := gc.CheckAlloc(tc.node, tc.alloc, "")
			if ok != tc.ok {
				t.Fatalf("CheckAlloc = %v (%q), want %v", ok, reason, tc.ok)
			}
			if !ok && reason != ReasonHostVolumes {
				t.Errorf("reason = %q, want %q", reason, ReasonHostVolumes)
			}
		})
	}
	// A CSI-only group gets no host volume checker.
	if NewHostVolumeChecker(&schedulerpb.TaskGroup{Volumes: []*schedulerpb.VolumeRequest{{Type: "csi", Source: "x"}}}) != nil {
		t.Error("a CSI volume made a host volume checker")
	}
}

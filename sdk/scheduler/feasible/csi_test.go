package feasible

import (
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func csiNode(id string, plugins ...*schedulerpb.CSINodePlugin) *schedulerpb.Node {
	return &schedulerpb.Node{Id: id, Drivers: []string{"exec"}, CsiNodePlugins: plugins}
}

func hostpath(mut ...func(*schedulerpb.CSINodePlugin)) *schedulerpb.CSINodePlugin {
	p := &schedulerpb.CSINodePlugin{PluginId: "hostpath", Healthy: true}
	for _, m := range mut {
		m(p)
	}
	return p
}

func csiVol(id, mode string, mut ...func(*schedulerpb.CSIVolume)) *schedulerpb.CSIVolume {
	v := &schedulerpb.CSIVolume{
		Namespace: "default", Id: id, PluginId: "hostpath", Schedulable: true, AccessMode: mode,
		ReadSchedulable: true, WriteSchedulable: true, HasFreeReadClaims: true, HasFreeWriteClaims: true,
	}
	for _, m := range mut {
		m(v)
	}
	return v
}

func writers(claims ...*schedulerpb.CSIVolumeClaim) func(*schedulerpb.CSIVolume) {
	return func(v *schedulerpb.CSIVolume) { v.WriteClaims = claims }
}

func readers(claims ...*schedulerpb.CSIVolumeClaim) func(*schedulerpb.CSIVolume) {
	return func(v *schedulerpb.CSIVolume) { v.ReadClaims = claims }
}

func csiJob(vols ...*schedulerpb.VolumeRequest) (*schedulerpb.Job, *schedulerpb.TaskGroup) {
	tg := &schedulerpb.TaskGroup{Name: "g", Count: 3, Volumes: vols,
		Tasks: []*schedulerpb.Task{{Name: "t", Driver: "exec"}}}
	return &schedulerpb.Job{Id: "j", Namespace: "default", TaskGroups: []*schedulerpb.TaskGroup{tg}}, tg
}

func volReq(source, mode string, readOnly, perAlloc bool) *schedulerpb.VolumeRequest {
	return &schedulerpb.VolumeRequest{Name: "data", Type: "csi", Source: source, AccessMode: mode,
		AttachmentMode: "file-system", ReadOnly: readOnly, PerAlloc: perAlloc}
}

func TestCSIChecker(t *testing.T) {
	const (
		snw  = "single-node-writer"
		snr  = "single-node-reader-only"
		mnr  = "multi-node-reader-only"
		mnsw = "multi-node-single-writer"
		mnmw = "multi-node-multi-writer"
	)
	live := func(id string) *schedulerpb.Allocation {
		return &schedulerpb.Allocation{Id: id, JobId: "j", Namespace: "default", DesiredStatus: "run", ClientStatus: "running"}
	}
	for _, tc := range []struct {
		name     string
		req      *schedulerpb.VolumeRequest
		vols     []*schedulerpb.CSIVolume
		allocs   []*schedulerpb.Allocation
		node     *schedulerpb.Node
		alloc    string // alloc name checked
		self     string
		released string
		want     string // "" feasible
	}{
		{name: "feasible", req: volReq("v", snw, false, false), vols: []*schedulerpb.CSIVolume{csiVol("v", snw)},
			node: csiNode("n1", hostpath())},
		{name: "volume missing", req: volReq("v", snw, false, false),
			node: csiNode("n1", hostpath()), want: "missing CSI volume(s) v"},
		{name: "volume of another namespace is missing", req: volReq("v", snw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", snw, func(v *schedulerpb.CSIVolume) { v.Namespace = "other" })},
			node: csiNode("n1", hostpath()), want: "missing CSI volume(s) v"},
		{name: "plugin missing", req: volReq("v", snw, false, false), vols: []*schedulerpb.CSIVolume{csiVol("v", snw)},
			node: csiNode("n1", &schedulerpb.CSINodePlugin{PluginId: "other", Healthy: true}),
			want: "CSI plugin hostpath is missing from client n1"},
		{name: "plugin unhealthy", req: volReq("v", snw, false, false), vols: []*schedulerpb.CSIVolume{csiVol("v", snw)},
			node: csiNode("n1", hostpath(func(p *schedulerpb.CSINodePlugin) { p.Healthy = false })),
			want: "CSI plugin hostpath is unhealthy on client n1"},
		{name: "max volumes", req: volReq("v", mnmw, false, false), vols: []*schedulerpb.CSIVolume{csiVol("v", mnmw)},
			node: csiNode("n1", hostpath(func(p *schedulerpb.CSINodePlugin) { p.MaxVolumes, p.VolumesInUse = 2, 2 })),
			want: "CSI plugin hostpath has the maximum number of volumes on client n1"},
		{name: "max volumes: below the limit", req: volReq("v", mnmw, false, false), vols: []*schedulerpb.CSIVolume{csiVol("v", mnmw)},
			node: csiNode("n1", hostpath(func(p *schedulerpb.CSINodePlugin) { p.MaxVolumes, p.VolumesInUse = 2, 1 }))},
		{name: "max volumes: the volume is already on the node", req: volReq("v", mnmw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", mnmw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n1"}))},
			node: csiNode("n1", hostpath(func(p *schedulerpb.CSINodePlugin) { p.MaxVolumes, p.VolumesInUse = 1, 1 }))},
		{name: "topology match", req: volReq("v", snw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", snw, func(v *schedulerpb.CSIVolume) {
				v.Topologies = []*schedulerpb.CSITopology{{Segments: map[string]string{"zone": "b"}}, {Segments: map[string]string{"zone": "a"}}}
			})},
			node: csiNode("n1", hostpath(func(p *schedulerpb.CSINodePlugin) {
				p.AccessibleTopology = map[string]string{"zone": "a", "rack": "r1"}
			}))},
		{name: "topology mismatch", req: volReq("v", snw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", snw, func(v *schedulerpb.CSIVolume) {
				v.Topologies = []*schedulerpb.CSITopology{{Segments: map[string]string{"zone": "b"}}}
			})},
			node: csiNode("n1", hostpath(func(p *schedulerpb.CSINodePlugin) { p.AccessibleTopology = map[string]string{"zone": "a"} })),
			want: "CSI volume v has exhausted its available topology"},
		{name: "topology: node reports none", req: volReq("v", snw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", snw, func(v *schedulerpb.CSIVolume) {
				v.Topologies = []*schedulerpb.CSITopology{{Segments: map[string]string{"zone": "b"}}}
			})},
			node: csiNode("n1", hostpath()), want: "CSI volume v has exhausted its available topology"},
		{name: "read: not read-schedulable", req: volReq("v", mnr, true, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", mnr, func(v *schedulerpb.CSIVolume) { v.ReadSchedulable = false })},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available reader claims"},
		{name: "read: multi-node reader with readers", req: volReq("v", mnr, true, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", mnr, readers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n2"}))},
			node: csiNode("n1", hostpath())},
		{name: "read: single-node reader held by another job", req: volReq("v", snr, true, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", snr, readers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n2"}))},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available reader claims"},
		{name: "write: not write-schedulable", req: volReq("v", snw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", snw, func(v *schedulerpb.CSIVolume) { v.WriteSchedulable = false })},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "write: reader-mode volume", req: volReq("v", mnr, false, false), vols: []*schedulerpb.CSIVolume{csiVol("v", mnr)},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "write: single writer held by another job", req: volReq("v", mnsw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", mnsw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n2"}))},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "write: single writer held by a collected alloc", req: volReq("v", mnsw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", mnsw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "gone", NodeId: "n2"}))},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "write: single-node writer read by another job", req: volReq("v", snw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", snw, readers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n1"}))},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "write: multi writer held by another job", req: volReq("v", mnmw, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", mnmw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n2"}))},
			node: csiNode("n1", hostpath())},
		{name: "write: held by a finished alloc of the same job", req: volReq("v", snw, false, false),
			vols:   []*schedulerpb.CSIVolume{csiVol("v", snw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "a1", JobId: "j", NodeId: "n2"}))},
			allocs: []*schedulerpb.Allocation{{Id: "a1", JobId: "j", DesiredStatus: "run", ClientStatus: "failed"}},
			node:   csiNode("n1", hostpath())},
		{name: "write: held by a same-job alloc the plan stops", req: volReq("v", snw, false, false),
			vols:   []*schedulerpb.CSIVolume{csiVol("v", snw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "a1", JobId: "j", NodeId: "n2"}))},
			allocs: []*schedulerpb.Allocation{live("a1")}, released: "a1",
			node: csiNode("n1", hostpath())},
		{name: "write: held by a same-job alloc being stopped", req: volReq("v", snw, false, false),
			vols:   []*schedulerpb.CSIVolume{csiVol("v", snw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "a1", JobId: "j", NodeId: "n2"}))},
			allocs: []*schedulerpb.Allocation{{Id: "a1", JobId: "j", DesiredStatus: "stop", ClientStatus: "running"}},
			node:   csiNode("n1", hostpath())},
		{name: "write: held by a same-job alloc that keeps running", req: volReq("v", snw, false, false),
			vols:   []*schedulerpb.CSIVolume{csiVol("v", snw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "a1", JobId: "j", NodeId: "n2"}))},
			allocs: []*schedulerpb.Allocation{live("a1")},
			node:   csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "write: the alloc updated in place holds it", req: volReq("v", snw, false, false),
			vols:   []*schedulerpb.CSIVolume{csiVol("v", snw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "a1", JobId: "j", NodeId: "n1"}))},
			allocs: []*schedulerpb.Allocation{live("a1")}, self: "a1",
			node: csiNode("n1", hostpath())},
		{name: "unknown mode takes the request's", req: volReq("v", snr, false, false),
			vols: []*schedulerpb.CSIVolume{csiVol("v", "")},
			node: csiNode("n1", hostpath()), want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "per_alloc: index 2 picks v[2]", req: volReq("v", snw, false, true), alloc: "j.g[2]",
			vols: []*schedulerpb.CSIVolume{csiVol("v[0]", snw), csiVol("v[2]", snw)},
			node: csiNode("n1", hostpath())},
		{name: "per_alloc: index 1 has no volume", req: volReq("v", snw, false, true), alloc: "j.g[1]",
			vols: []*schedulerpb.CSIVolume{csiVol("v[0]", snw), csiVol("v[2]", snw)},
			node: csiNode("n1", hostpath()), want: "missing CSI volume(s) v[1]"},
		{name: "per_alloc: each index its own claims", req: volReq("v", snw, false, true), alloc: "j.g[2]",
			vols: []*schedulerpb.CSIVolume{
				csiVol("v[0]", snw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n2"})),
				csiVol("v[2]", snw, writers(&schedulerpb.CSIVolumeClaim{AllocId: "o", JobId: "other", NodeId: "n2"})),
			},
			node: csiNode("n1", hostpath()), want: "CSI volume v[2] is unschedulable or has exhausted its available writer claims"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, tg := csiJob(tc.req)
			vols := NewCSIVolumes(&schedulerpb.ScheduleRequest{Job: job, CsiVolumes: tc.vols, Allocs: tc.allocs})
			if tc.released != "" {
				vols.Release(tc.released)
			}
			gc := NewGroupChainCSI(job, tg, NewCache(), vols)
			if !gc.Escaped {
				t.Error("a group with CSI volumes must escape its computed class")
			}
			ok, reason := gc.CheckAlloc(tc.node, tc.alloc, tc.self)
			if tc.want == "" {
				if !ok {
					t.Fatalf("infeasible: %q, want feasible", reason)
				}
				return
			}
			if ok || reason != tc.want {
				t.Fatalf("= %v %q, want infeasible %q", ok, reason, tc.want)
			}
		})
	}
}

func TestCSIOrderAfterDrivers(t *testing.T) {
	job, tg := csiJob(volReq("v", "single-node-writer", false, false))
	gc := NewGroupChain(job, tg, NewCache()) // no volumes in the request
	n := csiNode("n1", hostpath())
	if ok, reason := gc.Check(n); ok || reason != "missing CSI volume(s) v" {
		t.Errorf("= %v %q, want the missing volume", ok, reason)
	}
	n.Drivers = nil
	if ok, reason := gc.Check(n); ok || reason != ReasonMissingDrivers {
		t.Errorf("= %v %q, want the driver reason first", ok, reason)
	}
	_, plain := csiJob()
	if NewGroupChain(job, plain, NewCache()).Escaped {
		t.Error("a group without volumes does not escape")
	}
}

// TestCSIPlanClaims: claims taken by earlier placements of the same plan
// count for the later ones.
func TestCSIPlanClaims(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		readOnly   bool
		maxVolumes int64
		second     string // node of the second placement
		want       string
	}{
		{name: "single-node writer on another node", mode: "single-node-writer", second: "n2",
			want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "multi-node single writer on another node", mode: "multi-node-single-writer", second: "n2",
			want: "CSI volume v is unschedulable or has exhausted its available writer claims"},
		{name: "multi-node multi writer", mode: "multi-node-multi-writer", second: "n2"},
		{name: "single-node reader", mode: "single-node-reader-only", readOnly: true, second: "n2",
			want: "CSI volume v is unschedulable or has exhausted its available reader claims"},
		{name: "multi-node reader", mode: "multi-node-reader-only", readOnly: true, second: "n2"},
		{name: "max volumes counts the plan's", mode: "multi-node-multi-writer", maxVolumes: 1, second: "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, tg := csiJob(volReq("v", tc.mode, tc.readOnly, false))
			vols := NewCSIVolumes(&schedulerpb.ScheduleRequest{Job: job, CsiVolumes: []*schedulerpb.CSIVolume{csiVol("v", tc.mode)}})
			gc := NewGroupChainCSI(job, tg, NewCache(), vols)
			plugin := func(p *schedulerpb.CSINodePlugin) { p.MaxVolumes = tc.maxVolumes }
			n1, n2 := csiNode("n1", hostpath(plugin)), csiNode("n2", hostpath(plugin))
			if ok, reason := gc.CheckAlloc(n1, "j.g[0]", ""); !ok {
				t.Fatalf("first placement infeasible: %q", reason)
			}
			gc.Placed("n1", "j.g[0]")
			second := n2
			if tc.second == "n1" {
				second = n1
			}
			ok, reason := gc.CheckAlloc(second, "j.g[1]", "")
			if tc.want == "" {
				if !ok {
					t.Fatalf("second placement infeasible: %q", reason)
				}
				return
			}
			if ok || reason != tc.want {
				t.Fatalf("second = %v %q, want %q", ok, reason, tc.want)
			}
		})
	}
	// A second volume of the plugin on a node at its limit does not fit.
	job, tg := csiJob(volReq("v", "multi-node-multi-writer", false, true))
	vols := NewCSIVolumes(&schedulerpb.ScheduleRequest{Job: job, CsiVolumes: []*schedulerpb.CSIVolume{
		csiVol("v[0]", "multi-node-multi-writer"), csiVol("v[1]", "multi-node-multi-writer")}})
	gc := NewGroupChainCSI(job, tg, NewCache(), vols)
	if !gc.PerAlloc() {
		t.Error("PerAlloc = false for a per_alloc group")
	}
	n := csiNode("n1", hostpath(func(p *schedulerpb.CSINodePlugin) { p.MaxVolumes = 1 }))
	gc.Placed("n1", "j.g[0]")
	if ok, reason := gc.CheckAlloc(n, "j.g[1]", ""); ok || reason != "CSI plugin hostpath has the maximum number of volumes on client n1" {
		t.Errorf("= %v %q, want the max volumes reason", ok, reason)
	}
}

func TestAllocIndex(t *testing.T) {
	for name, want := range map[string]int{"j.g[3]": 3, "j.g[12]": 12, "": 0, "j.g": 0, "j.g[x]": 0, "a[1].g[2]": 2} {
		if got := AllocIndex(name); got != want {
			t.Errorf("AllocIndex(%q) = %d, want %d", name, got, want)
		}
	}
}

package gcengine

import (
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

const (
	kAlloc = gcpb.ObjectKind_OBJECT_KIND_ALLOC
	kEval  = gcpb.ObjectKind_OBJECT_KIND_EVAL
	kJob   = gcpb.ObjectKind_OBJECT_KIND_JOB
	kNode  = gcpb.ObjectKind_OBJECT_KIND_NODE
	kClaim = gcpb.ObjectKind_OBJECT_KIND_CSI_CLAIM
	reap   = gcpb.Action_ACTION_REAP
	keep   = gcpb.Action_ACTION_KEEP
	rel    = gcpb.Action_ACTION_RELEASE
	ns     = structs.DefaultNamespace
)

func decision(kind gcpb.ObjectKind, namespace, id string, action gcpb.Action, index uint64) *gcpb.Decision {
	return &gcpb.Decision{Kind: kind, Namespace: namespace, Id: id, Action: action, ModifyIndex: index}
}

func item(kind gcpb.ObjectKind, namespace, id string, index uint64) Item {
	return Item{Kind: kind, Ref: structs.GCRef{Namespace: namespace, ID: id, ModifyIndex: index}}
}

func gcClaim(vol, alloc, node string) *structs.CSIVolumeClaimRequest {
	return &structs.CSIVolumeClaimRequest{Namespace: ns, VolumeID: vol, Claim: &structs.CSIVolumeClaim{
		AllocationID: alloc, NodeID: node, Mode: structs.CSIVolumeClaimGC, State: structs.CSIVolumeClaimStateUnpublishing}}
}

// TestDecide: what a checked answer makes the runner write: the objects
// decided reaped, children before their parents, at the decided index;
// then the claims decided released, volume by volume.
func TestDecide(t *testing.T) {
	evalPage := &gcpb.DecideRequest{Evals: []*gcpb.EvalCandidate{
		{Eval: &gcpb.Eval{Id: "e1", Namespace: ns}, Allocs: []*gcpb.Alloc{{Id: "a1", Namespace: ns}, {Id: "a2", Namespace: ns}}},
		{Eval: &gcpb.Eval{Id: "e2", Namespace: ns}},
	}}
	jobPage := &gcpb.DecideRequest{Jobs: []*gcpb.JobCandidate{{
		Job:    &gcpb.Job{Id: "j", Namespace: ns},
		Evals:  []*gcpb.Eval{{Id: "e", Namespace: ns}},
		Allocs: []*gcpb.Alloc{{Id: "a", Namespace: ns}},
	}}}
	mixedPage := &gcpb.DecideRequest{
		Nodes:         []*gcpb.Node{{Id: "n1"}, {Id: "n2"}},
		CsiPlugins:    []*gcpb.CSIPlugin{{Id: "p"}},
		OneTimeTokens: []*gcpb.OneTimeToken{{AccessorId: "ott"}},
		AclTokens:     []*gcpb.ACLToken{{AccessorId: "acl"}},
		Deployments:   []*gcpb.Deployment{{Id: "d", Namespace: ns}},
	}
	volPage := &gcpb.DecideRequest{CsiVolumes: []*gcpb.CSIVolume{
		{Id: "v1", Namespace: ns, Claims: []*gcpb.CSIClaim{{AllocId: "x", NodeId: "n"}, {AllocId: "y", NodeId: "n"}}},
		{Id: "v2", Namespace: ns, Claims: []*gcpb.CSIClaim{{AllocId: "z", NodeId: "m"}}},
		{Id: "v3", Namespace: ns, Claims: []*gcpb.CSIClaim{{AllocId: "w", NodeId: "m"}}},
	}}
	claim := func(vol, alloc string, action gcpb.Action, index uint64) *gcpb.Decision {
		return &gcpb.Decision{Kind: kClaim, Namespace: ns, VolumeId: vol, Id: alloc, Action: action, ModifyIndex: index}
	}
	cases := []struct {
		name string
		page *gcpb.DecideRequest
		dec  []*gcpb.Decision
		want Plan
	}{
		{name: "no decisions", page: evalPage},
		{name: "everything kept", page: evalPage, dec: []*gcpb.Decision{decision(kEval, ns, "e1", keep, 1), decision(kAlloc, ns, "a1", keep, 2)}},
		{name: "an eval's allocs before the eval", page: evalPage,
			dec: []*gcpb.Decision{decision(kEval, ns, "e1", reap, 5), decision(kAlloc, ns, "a2", reap, 4), decision(kAlloc, ns, "a1", reap, 3),
				decision(kEval, ns, "e2", keep, 6)},
			want: Plan{Reap: []Item{item(kAlloc, ns, "a1", 3), item(kAlloc, ns, "a2", 4), item(kEval, ns, "e1", 5)}}},
		{name: "allocs kept: only the decided ones", page: evalPage,
			dec:  []*gcpb.Decision{decision(kAlloc, ns, "a2", reap, 4), decision(kEval, ns, "e2", reap, 6)},
			want: Plan{Reap: []Item{item(kAlloc, ns, "a2", 4), item(kEval, ns, "e2", 6)}}},
		{name: "a job's allocs, then evals, then the job", page: jobPage,
			dec:  []*gcpb.Decision{decision(kJob, ns, "j", reap, 9), decision(kEval, ns, "e", reap, 8), decision(kAlloc, ns, "a", reap, 7)},
			want: Plan{Reap: []Item{item(kAlloc, ns, "a", 7), item(kEval, ns, "e", 8), item(kJob, ns, "j", 9)}}},
		{name: "a decision for an object not on the page is ignored", page: jobPage,
			dec: []*gcpb.Decision{decision(kJob, ns, "other", reap, 9)}},
		{name: "every other kind, in page order", page: mixedPage,
			dec: []*gcpb.Decision{
				decision(gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT, ns, "d", reap, 5),
				decision(gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN, "", "acl", reap, 4),
				decision(gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, "", "ott", reap, 3),
				decision(gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN, "", "p", reap, 2),
				decision(kNode, "", "n2", reap, 1),
			},
			want: Plan{Reap: []Item{item(kNode, "", "n2", 1), item(gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN, "", "p", 2),
				item(gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, "", "ott", 3), item(gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN, "", "acl", 4),
				item(gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT, ns, "d", 5)}}},
		{name: "claims released per volume, kept ones left out", page: volPage,
			dec: []*gcpb.Decision{claim("v1", "y", rel, 11), claim("v1", "x", keep, 11), claim("v2", "z", rel, 12), claim("v3", "w", keep, 13)},
			want: Plan{Release: []Release{
				{Namespace: ns, VolumeID: "v1", Index: 11, Claims: []*structs.CSIVolumeClaimRequest{gcClaim("v1", "y", "n")}},
				{Namespace: ns, VolumeID: "v2", Index: 12, Claims: []*structs.CSIVolumeClaimRequest{gcClaim("v2", "z", "m")}},
			}}},
		{name: "a claim decided reaped is not released", page: volPage,
			dec: []*gcpb.Decision{claim("v1", "x", reap, 11)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.page, &gcpb.DecideResponse{Decisions: tc.dec})
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decide =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// TestThresholds: the settings' thresholds (defaults for zero fields), or
// the force threshold for every collection.
func TestThresholds(t *testing.T) {
	def := sdkgc.DefaultThresholds()
	f := int64(sdkgc.ForceThreshold)
	cases := []struct {
		name  string
		s     Settings
		force bool
		want  *gcpb.Thresholds
	}{
		{name: "defaults", want: &gcpb.Thresholds{EvalNs: def.EvalNs, BatchEvalNs: def.BatchEvalNs, JobNs: def.JobNs, NodeNs: def.NodeNs,
			DeploymentNs: def.DeploymentNs, CsiVolumeClaimNs: def.CsiVolumeClaimNs, CsiPluginNs: def.CsiPluginNs, AclTokenNs: def.AclTokenNs}},
		{name: "set ones win", s: Settings{JobGCThreshold: time.Minute, NodeGCThreshold: time.Second},
			want: &gcpb.Thresholds{EvalNs: def.EvalNs, BatchEvalNs: def.BatchEvalNs, JobNs: int64(time.Minute), NodeNs: int64(time.Second),
				DeploymentNs: def.DeploymentNs, CsiVolumeClaimNs: def.CsiVolumeClaimNs, CsiPluginNs: def.CsiPluginNs, AclTokenNs: def.AclTokenNs}},
		{name: "forced", s: Settings{JobGCThreshold: time.Minute}, force: true,
			want: &gcpb.Thresholds{EvalNs: f, BatchEvalNs: f, JobNs: f, NodeNs: f, DeploymentNs: f, CsiVolumeClaimNs: f, CsiPluginNs: f, AclTokenNs: f}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Thresholds(tc.s, tc.force)
			if !proto.Equal(got, tc.want) {
				t.Fatalf("Thresholds = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestJobsOrder: force GC runs node GC last, so a node's allocations go
// first.
func TestJobsOrder(t *testing.T) {
	names := Jobs()
	if len(names) != 8 || names[len(names)-1] != "node-gc" {
		t.Fatalf("Jobs() = %v, want 8 jobs, node-gc last", names)
	}
}

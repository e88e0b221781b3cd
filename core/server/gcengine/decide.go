package gcengine

import (
	"time"

	"github.com/drover-org/drover/core/structs"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// The engine's decisions, pure functions of their arguments: which jobs
// there are and when each is due (jobs), the thresholds a run sends
// (Thresholds), the candidates it offers from a state snapshot
// (Candidates, pages.go) and what a checked answer of the plugin makes it
// write (Decide). The runner (engine.go, apply.go) reads the state, calls
// the plugin and commits through Raft.

// job is one core GC job.
type job struct {
	name       string
	collection gcpb.Collection
	interval   func(c *Config) time.Duration
	// enabled: nil is always.
	enabled func(c *Config) bool
}

func jobInterval(c *Config) time.Duration { return c.Settings.JobGCInterval }

// jobs in the order force GC runs them: node GC last, so that the
// allocations of a node are gone first.
var jobs = []job{
	{name: "job-gc", collection: gcpb.Collection_COLLECTION_JOB, interval: jobInterval},
	{name: "eval-gc", collection: gcpb.Collection_COLLECTION_EVAL, interval: jobInterval},
	{name: "csi-plugin-gc", collection: gcpb.Collection_COLLECTION_CSI_PLUGIN, interval: jobInterval},
	{name: "csi-volume-claim-gc", collection: gcpb.Collection_COLLECTION_CSI_VOLUME_CLAIM,
		interval: func(c *Config) time.Duration { return c.Settings.CSIVolumeClaimGCInterval }},
	{name: "one-time-token-gc", collection: gcpb.Collection_COLLECTION_ONE_TIME_TOKEN,
		interval: func(c *Config) time.Duration { return c.OneTimeTokenInterval }},
	{name: "expired-acl-token-gc", collection: gcpb.Collection_COLLECTION_ACL_TOKEN, interval: jobInterval,
		enabled: func(c *Config) bool { return c.ACLEnabled }},
	{name: "deployment-gc", collection: gcpb.Collection_COLLECTION_DEPLOYMENT, interval: jobInterval},
	{name: "node-gc", collection: gcpb.Collection_COLLECTION_NODE, interval: jobInterval},
}

// Jobs names the core GC jobs in the order force GC runs them.
func Jobs() []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.name
	}
	return out
}

func jobNamed(name string) (job, bool) {
	for _, j := range jobs {
		if j.name == name {
			return j, true
		}
	}
	return job{}, false
}

// Thresholds are the thresholds a run sends: the settings' (with their
// defaults), or sdk/gc.ForceThreshold for all when forced.
func Thresholds(s Settings, force bool) *gcpb.Thresholds {
	if force {
		f := int64(sdkgc.ForceThreshold)
		return &gcpb.Thresholds{EvalNs: f, BatchEvalNs: f, JobNs: f, NodeNs: f, DeploymentNs: f,
			CsiVolumeClaimNs: f, CsiPluginNs: f, AclTokenNs: f}
	}
	c := s.WithDefaults()
	return &gcpb.Thresholds{
		EvalNs: int64(c.EvalGCThreshold), BatchEvalNs: int64(c.BatchEvalGCThreshold), JobNs: int64(c.JobGCThreshold),
		NodeNs: int64(c.NodeGCThreshold), DeploymentNs: int64(c.DeploymentGCThreshold),
		CsiVolumeClaimNs: int64(c.CSIVolumeClaimGCThreshold), CsiPluginNs: int64(c.CSIPluginGCThreshold),
		AclTokenNs: int64(c.ACLTokenGCThreshold),
	}
}

// Item is one object to reap, at the index the plugin decided on.
type Item struct {
	Kind gcpb.ObjectKind
	Ref  structs.GCRef
}

// Release is the claims of one volume the plugin released, as GC
// pseudo-claims (structs.CSIVolumeClaimGC), and the volume's index the
// plugin decided on.
type Release struct {
	Namespace, VolumeID string
	Index               uint64
	Claims              []*structs.CSIVolumeClaimRequest
}

// Plan is what one checked answer of the plugin asks the runner to write:
// the objects to reap, children before their parents, then the claims to
// release, volume by volume in page order.
type Plan struct {
	Reap    []Item
	Release []Release
}

// Decide turns the plugin's answer resp to page (checked first with
// sdk/gc.ValidateResponse) into the writes it asks for. Objects the plugin
// keeps, or did not answer for, are left out.
func Decide(page *gcpb.DecideRequest, resp *gcpb.DecideResponse) Plan {
	var plan Plan
	dec := make(map[sdkgc.Key]*gcpb.Decision, len(resp.GetDecisions()))
	for _, d := range resp.GetDecisions() {
		if d.GetAction() == gcpb.Action_ACTION_REAP || d.GetAction() == gcpb.Action_ACTION_RELEASE {
			dec[sdkgc.DecisionKey(d)] = d
		}
	}
	if len(dec) == 0 {
		return plan
	}
	add := func(kind gcpb.ObjectKind, ns, id string) {
		k := sdkgc.Key{Kind: kind, Namespace: ns, ID: id}
		if d := dec[k]; d != nil {
			plan.Reap = append(plan.Reap, Item{Kind: kind, Ref: structs.GCRef{Namespace: ns, ID: id, ModifyIndex: d.GetModifyIndex()}})
		}
	}
	const (
		kAlloc = gcpb.ObjectKind_OBJECT_KIND_ALLOC
		kEval  = gcpb.ObjectKind_OBJECT_KIND_EVAL
	)
	for _, c := range page.GetEvals() {
		for _, a := range c.GetAllocs() {
			add(kAlloc, a.GetNamespace(), a.GetId())
		}
		add(kEval, c.GetEval().GetNamespace(), c.GetEval().GetId())
	}
	for _, c := range page.GetJobs() {
		for _, a := range c.GetAllocs() {
			add(kAlloc, a.GetNamespace(), a.GetId())
		}
		for _, e := range c.GetEvals() {
			add(kEval, e.GetNamespace(), e.GetId())
		}
		add(gcpb.ObjectKind_OBJECT_KIND_JOB, c.GetJob().GetNamespace(), c.GetJob().GetId())
	}
	for _, n := range page.GetNodes() {
		add(gcpb.ObjectKind_OBJECT_KIND_NODE, "", n.GetId())
	}
	for _, p := range page.GetCsiPlugins() {
		add(gcpb.ObjectKind_OBJECT_KIND_CSI_PLUGIN, "", p.GetId())
	}
	for _, t := range page.GetOneTimeTokens() {
		add(gcpb.ObjectKind_OBJECT_KIND_ONE_TIME_TOKEN, "", t.GetAccessorId())
	}
	for _, t := range page.GetAclTokens() {
		add(gcpb.ObjectKind_OBJECT_KIND_ACL_TOKEN, "", t.GetAccessorId())
	}
	for _, d := range page.GetDeployments() {
		add(gcpb.ObjectKind_OBJECT_KIND_DEPLOYMENT, d.GetNamespace(), d.GetId())
	}
	for _, v := range page.GetCsiVolumes() {
		r := Release{Namespace: v.GetNamespace(), VolumeID: v.GetId()}
		for _, c := range v.GetClaims() {
			d := dec[sdkgc.Key{Kind: gcpb.ObjectKind_OBJECT_KIND_CSI_CLAIM, Namespace: v.GetNamespace(), VolumeID: v.GetId(), ID: c.GetAllocId()}]
			if d == nil || d.GetAction() != gcpb.Action_ACTION_RELEASE {
				continue
			}
			r.Index = d.GetModifyIndex()
			r.Claims = append(r.Claims, &structs.CSIVolumeClaimRequest{Namespace: v.GetNamespace(), VolumeID: v.GetId(),
				Claim: &structs.CSIVolumeClaim{AllocationID: c.GetAllocId(), NodeID: c.GetNodeId(),
					Mode: structs.CSIVolumeClaimGC, State: structs.CSIVolumeClaimStateUnpublishing}})
		}
		if len(r.Claims) > 0 {
			plan.Release = append(plan.Release, r)
		}
	}
	return plan
}

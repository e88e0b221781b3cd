package ui

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// IDs of the world's fixed objects.
const (
	allocRunning = "00000000-0000-0000-0000-000000000000" // job-0000, node-000, claims vol-000
	allocPast    = "00000000-0000-0000-0000-000000000001" // job-0000, its past claim
	evalTeam     = "eeteam00-0000-0000-0000-000000000000"
	depTeam      = "ddteam00-0000-0000-0000-000000000000"
)

func worldEvalID(i int) string { return fmt.Sprintf("ee%06d-0000-0000-0000-000000000000", i) }
func worldDepID(i int) string  { return fmt.Sprintf("dd%06d-0000-0000-0000-000000000000", i) }

// benchWorld is benchStore with the rest of a cluster around it: 100
// nodes (node-000 runs CSI plugin hp), a namespace "team" with a job, an
// evaluation, a deployment and a volume of its own, one evaluation and
// one deployment per job (every tenth evaluation with placement
// failures, even jobs' deployments running with a canary to promote), a
// periodic job and a parameterized one with a child each, and ten CSI
// volumes, vol-000 claimed by allocRunning and released by allocPast.
func benchWorld(tb testing.TB, jobs, allocsPerJob int) *state.StateStore {
	tb.Helper()
	st := benchStore(tb, jobs, allocsPerJob)
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	index := uint64(100000)
	next := func() uint64 { index++; return index }
	must(st.UpsertNamespaces(next(), []*structs.Namespace{{Name: "team"}}))
	for i := range 100 {
		n := &structs.Node{ID: fmt.Sprintf("node-%03d", i), Name: fmt.Sprintf("n%03d", i), Datacenter: []string{"dc1", "dc2"}[i%2],
			Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible,
			NodeResources: &structs.NodeResources{Cpu: structs.NodeCpuResources{CpuShares: 20000}, Memory: structs.NodeMemoryResources{MemoryMB: 16384}}}
		if i == 0 {
			n.CSINodePlugins = map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true, Provider: "hostpath.csi.k8s.io", ProviderVersion: "1.2.0",
				NodeInfo: &structs.CSINodeInfo{ID: "csi-node-000"}}}
		}
		must(st.UpsertNode(next(), n))
	}
	newJob := func(ns, id, typ string, edit func(*structs.Job)) *structs.Job {
		j := &structs.Job{ID: id, Namespace: ns, Type: typ, Priority: 50, Datacenters: []string{"dc1"},
			SubmitTime: time.Unix(1700000000, 0).UnixNano(),
			TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}}}}
		if edit != nil {
			edit(j)
		}
		j.Canonicalize()
		must(st.UpsertJob(next(), j))
		return j
	}
	secret := newJob("team", "secret", "service", nil)
	newJob("default", "nightly", "batch", func(j *structs.Job) { j.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "@daily"} })
	newJob("default", "nightly/periodic-1700000000", "batch", func(j *structs.Job) { j.ParentID = "nightly" })
	newJob("default", "batchp", "batch", func(j *structs.Job) {
		j.ParameterizedJob = &structs.ParameterizedJobConfig{MetaRequired: []string{"who"}}
	})
	newJob("default", "batchp/dispatch-1700000000-abcd1234", "batch", func(j *structs.Job) { j.ParentID = "batchp"; j.Dispatched = true })
	must(st.UpsertAllocs(next(), []*structs.Allocation{{ID: "aaaateam-0000-0000-0000-000000000000", Namespace: "team", JobID: "secret",
		Job: secret, TaskGroup: "g", Name: "secret.g[0]", NodeID: "node-001", DesiredStatus: "run", ClientStatus: "running"}}))

	var evals []*structs.Evaluation
	for i := range jobs {
		e := &structs.Evaluation{ID: worldEvalID(i), Namespace: "default", JobID: fmt.Sprintf("job-%04d", i), Type: "service",
			TriggeredBy: "job-register", Status: structs.EvalStatusComplete, Priority: 50, CreateIndex: uint64(i + 1)}
		if i%10 == 0 {
			e.FailedTGAllocs = map[string]*structs.AllocMetric{"worker": {NodesEvaluated: 3, NodesFiltered: 1, NodesExhausted: 2,
				NodesAvailable: map[string]int{"dc1": 3}, DimensionExhausted: map[string]int{"memory": 2},
				ConstraintFiltered: map[string]int{"${attr.kernel.name} = windows": 1}, CoalescedFailures: 1}}
			e.QueuedAllocations = map[string]int{"worker": 2}
		}
		evals = append(evals, e)
	}
	evals = append(evals, &structs.Evaluation{ID: evalTeam, Namespace: "team", JobID: "secret", Type: "service",
		TriggeredBy: "job-register", Status: structs.EvalStatusComplete})
	must(st.UpsertEvals(next(), evals))

	for i := range jobs {
		d := &structs.Deployment{ID: worldDepID(i), Namespace: "default", JobID: fmt.Sprintf("job-%04d", i), Status: structs.DeploymentStatusSuccessful,
			TaskGroups: map[string]*structs.DeploymentState{"web": {DesiredTotal: allocsPerJob / 2, PlacedAllocs: allocsPerJob / 2, HealthyAllocs: allocsPerJob / 2}}}
		if i%2 == 0 {
			d.Status, d.StatusDescription = structs.DeploymentStatusRunning, structs.DeploymentStatusDescriptionRunningNeedsPromotion
			d.TaskGroups["web"].DesiredCanaries = 1
			d.TaskGroups["web"].PlacedCanaries = []string{fmt.Sprintf("%08d-0000-0000-0000-%012d", i, 0)}
			d.TaskGroups["web"].HealthyAllocs, d.TaskGroups["web"].UnhealthyAllocs = 0, 1
		}
		must(st.UpsertDeployment(next(), d))
	}
	if jobs > 0 && allocsPerJob > 1 {
		// job-0000's deployment holds its first two allocations: a
		// healthy canary and one whose health is not known yet.
		var upd []*structs.Allocation
		for _, id := range []string{allocRunning, allocPast} {
			a, err := st.AllocByID(nil, id)
			must(err)
			a = a.Copy()
			a.DeploymentID = worldDepID(0)
			if id == allocRunning {
				healthy := true
				a.DeploymentStatus = &structs.AllocDeploymentStatus{Healthy: &healthy, Canary: true}
			}
			upd = append(upd, a)
		}
		must(st.UpsertAllocs(next(), upd))
	}
	must(st.UpsertDeployment(next(), &structs.Deployment{ID: depTeam, Namespace: "team", JobID: "secret", Status: structs.DeploymentStatusRunning}))

	var vols []*structs.CSIVolume
	for i := range 10 {
		vols = append(vols, &structs.CSIVolume{ID: fmt.Sprintf("vol-%03d", i), Name: fmt.Sprintf("data %d", i), Namespace: "default",
			PluginID: "hp", ExternalID: fmt.Sprintf("ext-%03d", i),
			RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}})
	}
	// vol-000 takes several writers, so that a released claim and a taken
	// one can be on it at once.
	vols[0].RequestedCapabilities = []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter,
		AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	vols = append(vols, &structs.CSIVolume{ID: "vol-team", Namespace: "team", PluginID: "hp", ExternalID: "ext-team",
		RequestedCapabilities: vols[1].RequestedCapabilities})
	must(st.UpsertCSIVolumes(next(), vols))
	if jobs > 0 && allocsPerJob > 1 {
		claim := func(alloc string, state structs.CSIVolumeClaimState) *structs.CSIVolumeClaimRequest {
			return &structs.CSIVolumeClaimRequest{Namespace: "default", VolumeID: "vol-000", Claim: &structs.CSIVolumeClaim{
				AllocationID: alloc, NodeID: "node-000", ExternalNodeID: "csi-node-000", Mode: structs.CSIVolumeClaimWrite, State: state,
				AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
		}
		must(st.CSIVolumeClaims(next(), []*structs.CSIVolumeClaimRequest{claim(allocPast, structs.CSIVolumeClaimStateTaken)}))
		must(st.CSIVolumeClaims(next(), []*structs.CSIVolumeClaimRequest{claim(allocPast, structs.CSIVolumeClaimStateNodeDetached)}))
		must(st.CSIVolumeClaims(next(), []*structs.CSIVolumeClaimRequest{claim(allocRunning, structs.CSIVolumeClaimStateTaken)}))
	}
	return st
}

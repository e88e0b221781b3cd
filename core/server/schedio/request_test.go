package schedio

import (
	"slices"
	"testing"
	"time"

	pb "github.com/drover-org/drover/sdk/proto/schedulerpb"

	"github.com/drover-org/drover/core/structs"
)

// TestBuildRequest: the request built from a state fixture carries the
// eval, the clock, the job and every version its allocs run, its allocs
// (not the finished ones of a purged namesake), and the nodes: those of
// the job's pool with their usage, plus any outside it holding the job's
// allocs; a stopped or purged job gets only the latter.
func TestBuildRequest(t *testing.T) {
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	type world struct {
		f                *fixture
		a, b, gpu        *structs.Node
		job, other       *structs.Job
		ev               *structs.Evaluation
		allocID, otherID string
	}
	alloc := func(id string, job *structs.Job, node *structs.Node, cpu int, ports ...int) *structs.Allocation {
		a := &structs.Allocation{ID: id, Namespace: job.Namespace, JobID: job.ID, Job: job, NodeID: node.ID, TaskGroup: "g",
			Name: job.ID + ".g[0]", DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning,
			AllocatedResources: &structs.AllocatedResources{Tasks: map[string]*structs.AllocatedTaskResources{
				"t": {Cpu: structs.AllocatedCpuResources{CpuShares: int64(cpu)}, Memory: structs.AllocatedMemoryResources{MemoryMB: 64}}}}}
		for _, p := range ports {
			a.AllocatedResources.Shared.Ports = append(a.AllocatedResources.Shared.Ports, structs.AllocatedPortMapping{Label: "p", Value: p})
		}
		return a
	}
	// Two ready nodes in the default pool, one in "gpu"; the job runs one
	// alloc on a, another job one on a too.
	setup := func(t *testing.T) *world {
		w := &world{f: newFixture(t), a: testNode("a"), b: testNode("b"), gpu: testNode("gpu")}
		for _, n := range []*structs.Node{w.a, w.b, w.gpu} {
			n.Status, n.SchedulingEligibility, n.NodePool = structs.NodeStatusReady, structs.NodeSchedulingEligible, structs.NodePoolDefault
		}
		w.gpu.NodePool = "gpu"
		w.f.nodes(w.a, w.b, w.gpu)
		w.job, w.other = testJob("web", "service"), testJob("other", "batch")
		w.job.Namespace, w.other.Namespace = structs.DefaultNamespace, structs.DefaultNamespace
		w.job.NodePool = structs.NodePoolDefault
		w.f.jobs(w.job, w.other)
		w.job, _ = w.f.snapshot().JobByID(nil, w.job.Namespace, w.job.ID)
		w.allocID, w.otherID = "00000000-0000-0000-0000-00000000000a", "00000000-0000-0000-0000-00000000000b"
		w.f.allocs(alloc(w.allocID, w.job, w.a, 100, 8080), alloc(w.otherID, w.other, w.a, 250, 20001))
		w.ev = &structs.Evaluation{ID: "ev-1", Namespace: w.job.Namespace, JobID: w.job.ID, Type: w.job.Type, Priority: 50,
			TriggeredBy: structs.EvalTriggerJobRegister, JobModifyIndex: w.job.JobModifyIndex}
		return w
	}
	nodeIDs := func(req *pb.ScheduleRequest) []string {
		var ids []string
		for _, n := range req.GetNodes() {
			ids = append(ids, n.GetName())
		}
		slices.Sort(ids)
		return ids
	}
	allocIDs := func(req *pb.ScheduleRequest) []string {
		var ids []string
		for _, a := range req.GetAllocs() {
			ids = append(ids, a.GetId())
		}
		slices.Sort(ids)
		return ids
	}
	cases := []struct {
		name  string
		edit  func(w *world) *structs.Job // the job to build for
		check func(t *testing.T, w *world, req *pb.ScheduleRequest)
	}{
		{"nodes of the pool with their usage", func(w *world) *structs.Job { return w.job }, func(t *testing.T, w *world, req *pb.ScheduleRequest) {
			if got := nodeIDs(req); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("nodes = %v, want [a b]", got)
			}
			if req.GetEval().GetId() != "ev-1" || req.GetAttempt() != 2 || req.GetNowNs() != now.UnixNano() || req.GetJob().GetId() != "web" {
				t.Errorf("eval %v attempt %d now %d job %q", req.GetEval(), req.GetAttempt(), req.GetNowNs(), req.GetJob().GetId())
			}
			for _, n := range req.GetNodes() {
				if n.GetName() != "a" {
					continue
				}
				if n.GetUsed().GetCpu() != 350 || !slices.Equal(n.GetUsedPorts(), []int32{8080, 20001}) {
					t.Errorf("node a used %v ports %v, want 350 MHz and [8080 20001]", n.GetUsed(), n.GetUsedPorts())
				}
				if len(n.GetOthers()) != 0 {
					t.Errorf("preemption is off, yet others are listed: %v", n.GetOthers())
				}
			}
			if got := allocIDs(req); !slices.Equal(got, []string{w.allocID}) {
				t.Errorf("allocs = %v, want only the job's", got)
			}
		}},
		{"the job moved pools: its alloc's node is sent too", func(w *world) *structs.Job {
			j := w.job.Copy()
			j.NodePool = "gpu"
			return j
		}, func(t *testing.T, _ *world, req *pb.ScheduleRequest) {
			if got := nodeIDs(req); !slices.Equal(got, []string{"a", "gpu"}) {
				t.Fatalf("nodes = %v, want [a gpu]", got)
			}
		}},
		{"all pools", func(w *world) *structs.Job {
			j := w.job.Copy()
			j.NodePool = structs.NodePoolAll
			return j
		}, func(t *testing.T, _ *world, req *pb.ScheduleRequest) {
			if got := nodeIDs(req); !slices.Equal(got, []string{"a", "b", "gpu"}) {
				t.Fatalf("nodes = %v, want all three", got)
			}
		}},
		{"stopped job: only the nodes of its allocs", func(w *world) *structs.Job {
			j := w.job.Copy()
			j.Stop = true
			return j
		}, func(t *testing.T, _ *world, req *pb.ScheduleRequest) {
			if got := nodeIDs(req); !slices.Equal(got, []string{"a"}) {
				t.Fatalf("nodes = %v, want [a]", got)
			}
			if !req.GetJob().GetStop() {
				t.Error("job not sent stopped")
			}
		}},
		{"purged job: no job, its allocs and their nodes", func(*world) *structs.Job { return nil }, func(t *testing.T, w *world, req *pb.ScheduleRequest) {
			if req.GetJob() != nil || !slices.Equal(nodeIDs(req), []string{"a"}) || !slices.Equal(allocIDs(req), []string{w.allocID}) {
				t.Fatalf("job %v nodes %v allocs %v", req.GetJob(), nodeIDs(req), allocIDs(req))
			}
		}},
		{"a purged namesake's finished allocs are left out, its live ones kept", func(w *world) *structs.Job {
			old := w.job.Copy()
			old.CreateIndex, old.JobModifyIndex = 1, 1
			done := alloc("00000000-0000-0000-0000-0000000000d1", old, w.b, 100)
			done.ClientStatus = structs.AllocClientStatusComplete
			live := alloc("00000000-0000-0000-0000-0000000000d2", old, w.b, 100)
			w.f.allocs(done, live)
			return w.job
		}, func(t *testing.T, w *world, req *pb.ScheduleRequest) {
			if got := allocIDs(req); !slices.Equal(got, []string{w.allocID, "00000000-0000-0000-0000-0000000000d2"}) {
				t.Fatalf("allocs = %v", got)
			}
			if len(req.GetJobVersions()) != 1 || req.GetJobVersions()[0].GetJobModifyIndex() != 1 {
				t.Errorf("job versions = %v, want the namesake's once", req.GetJobVersions())
			}
		}},
		{"a drain deadline passed by now", func(w *world) *structs.Job {
			d := testNode("d")
			d.Status, d.SchedulingEligibility, d.NodePool = structs.NodeStatusReady, structs.NodeSchedulingIneligible, structs.NodePoolDefault
			d.DrainStrategy = &structs.DrainStrategy{ForceDeadline: now.Add(-time.Second)}
			w.f.nodes(d)
			return w.job
		}, func(t *testing.T, _ *world, req *pb.ScheduleRequest) {
			for _, n := range req.GetNodes() {
				if got, want := n.GetDrainDeadlinePassed(), n.GetName() == "d"; got != want || n.GetDraining() != want {
					t.Errorf("node %s: draining %v, deadline passed %v, want %v", n.GetName(), n.GetDraining(), got, want)
				}
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := setup(t)
			job := tc.edit(w)
			for _, cache := range []*NodeCache{nil, NewNodeCache()} {
				req, err := BuildRequest(w.f.snapshot(), cache, w.ev, job, 2, now)
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, w, req)
			}
		})
	}
}

// TestAllocTransitionsToPB: an alloc's DesiredTransition reaches the
// plugin: Reschedule (the deployment watcher's mark that lets a failed
// alloc of an active deployment be replaced) and ForceReschedule, each
// only when set true.
func TestAllocTransitionsToPB(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name                      string
		dt                        structs.DesiredTransition
		wantReschedule, wantForce bool
	}{
		{"none", structs.DesiredTransition{}, false, false},
		{"reschedule", structs.DesiredTransition{Reschedule: &yes}, true, false},
		{"reschedule false", structs.DesiredTransition{Reschedule: &no}, false, false},
		{"force", structs.DesiredTransition{ForceReschedule: &yes}, false, true},
		{"both", structs.DesiredTransition{Reschedule: &yes, ForceReschedule: &yes}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := allocToPB(&structs.Allocation{ID: "a", DesiredTransition: tc.dt})
			if p.GetReschedule() != tc.wantReschedule || p.GetForceReschedule() != tc.wantForce {
				t.Fatalf("reschedule %v force_reschedule %v, want %v %v", p.GetReschedule(), p.GetForceReschedule(), tc.wantReschedule, tc.wantForce)
			}
		})
	}
}

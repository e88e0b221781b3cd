package state

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// Builders of minimal, valid objects for the tests of this package.

func testStore(t testing.TB) *StateStore {
	t.Helper()
	s, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testBehaviors are the declarations of the built-in system and sysbatch
// plugins (plugins/scheduler-*/ Declaration, as pluginhost.Behavior turns
// them), which the leader stamps into every job it registers. The state
// store takes jobs as they are, so its tests stamp them the same way.
var testBehaviors = map[string]structs.JobTypeBehavior{
	"system": {
		MaxAttempts: 5, PerNode: true, RunningUntilStopped: true,
		DefaultRestart: &structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
		RefusedBlocks:  []string{structs.BlockAffinity, structs.BlockSpread, structs.BlockReschedule, structs.BlockMigrate},
		MaxGroupCount:  1, EvalOnNodeUpdate: true, EvalOnAllocEnd: true, DrainLast: true,
		PreemptionSwitch: structs.PreemptSwitchSystem,
	},
	"sysbatch": {
		MaxAttempts: 2, PerNode: true, RunsToCompletion: true,
		DefaultRestart: &structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail},
		AllowPeriodic:  true, AllowParameterized: true, AllowMaxRunDuration: true,
		RefusedBlocks:    []string{structs.BlockUpdate, structs.BlockReschedule, structs.BlockMigrate},
		EvalOnNodeJoin:   true,
		PreemptionSwitch: structs.PreemptSwitchSysBatch,
	},
}

// behaviorOf returns the test declaration of typ; nil for a type no
// built-in plugin serves.
func behaviorOf(typ string) *structs.JobTypeBehavior {
	b, ok := testBehaviors[typ]
	if !ok {
		return nil
	}
	return b.Copy()
}

func mockJob(typ string) *structs.Job {
	j := &structs.Job{
		ID:           "job-" + uuid.NewString()[:8],
		Namespace:    structs.DefaultNamespace,
		Type:         typ,
		TypeBehavior: behaviorOf(typ),
		TaskGroups: []*structs.TaskGroup{{
			Name:  "web",
			Count: 2,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"}}},
		}},
	}
	j.Canonicalize()
	return j
}

// declaredJob is a job of type typ declaring b, whatever its name.
func declaredJob(typ string, b *structs.JobTypeBehavior) *structs.Job {
	j := mockJob(typ)
	j.TypeBehavior = b
	return j
}

func mockPeriodic() *structs.Job {
	j := mockJob("batch")
	j.Periodic = &structs.PeriodicConfig{Enabled: true, Spec: "*/5 * * * *"}
	j.Canonicalize()
	return j
}

func mockParameterized() *structs.Job {
	j := mockJob("batch")
	j.ParameterizedJob = &structs.ParameterizedJobConfig{}
	j.Canonicalize()
	return j
}

// mockChild derives a periodic child of parent launched at unix second sec.
func mockChild(parent *structs.Job, sec int64) *structs.Job {
	c := parent.Copy()
	c.ID = parent.ID + structs.PeriodicLaunchSuffix + strconv.FormatInt(sec, 10)
	c.Name = c.ID
	c.ParentID = parent.ID
	c.Periodic = nil
	c.Status = ""
	return c
}

func mockNode() *structs.Node {
	return &structs.Node{
		ID:         uuid.NewString(),
		SecretID:   uuid.NewString(),
		Name:       "node",
		Datacenter: "dc1",
		NodePool:   structs.NodePoolDefault,
		Status:     structs.NodeStatusReady,
		Attributes: map[string]string{"kernel.name": "linux"},
		NodeResources: &structs.NodeResources{
			Cpu:    structs.NodeCpuResources{CpuShares: 4000},
			Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk:   structs.NodeDiskResources{DiskMB: 100000},
		},
	}
}

func mockEval(job *structs.Job, status string) *structs.Evaluation {
	return &structs.Evaluation{
		ID:          uuid.NewString(),
		Namespace:   job.Namespace,
		JobID:       job.ID,
		Type:        job.Type,
		Priority:    job.Priority,
		TriggeredBy: structs.EvalTriggerJobRegister,
		Status:      status,
	}
}

// mockAlloc places group "web" of job (as stored, so that it belongs to the
// current job instance) on node.
func mockAlloc(job *structs.Job, nodeID string) *structs.Allocation {
	return &structs.Allocation{
		ID:            uuid.NewString(),
		Namespace:     job.Namespace,
		EvalID:        uuid.NewString(),
		Name:          structs.AllocName(job.ID, "web", 0),
		NodeID:        nodeID,
		JobID:         job.ID,
		Job:           job,
		TaskGroup:     "web",
		DesiredStatus: structs.AllocDesiredStatusRun,
		ClientStatus:  structs.AllocClientStatusPending,
		AllocatedResources: &structs.AllocatedResources{
			Tasks: map[string]*structs.AllocatedTaskResources{"t": {
				Cpu:    structs.AllocatedCpuResources{CpuShares: 100},
				Memory: structs.AllocatedMemoryResources{MemoryMB: 256},
			}},
			Shared: structs.AllocatedSharedResources{DiskMB: 300},
		},
	}
}

// must fails the test on err.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// storedJob upserts job at index and returns the stored job.
func storedJob(t testing.TB, s *StateStore, index uint64, job *structs.Job) *structs.Job {
	t.Helper()
	must(t, s.UpsertJob(index, job))
	out, err := s.JobByID(nil, job.Namespace, job.ID)
	must(t, err)
	if out == nil {
		t.Fatalf("job %s not stored", job.ID)
	}
	return out
}

func jobStatus(t testing.TB, s *StateStore, job *structs.Job) string {
	t.Helper()
	out, err := s.JobByID(nil, job.Namespace, job.ID)
	must(t, err)
	if out == nil {
		t.Fatalf("job %s missing", job.ID)
	}
	return out.Status
}

func clientUpdate(id, status string) *structs.Allocation {
	return &structs.Allocation{ID: id, ClientStatus: status}
}

// Package schedulertest is the former scheduler test kit, kept so that
// existing imports build.
//
// Deprecated: use package conformance: conformance.Connect, conformance.Run
// (which checks far more than Conformance did) and conformance.Builder for
// requests.
package schedulertest

import (
	"fmt"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// Connect serves impl over an in-memory gRPC connection; see
// conformance.Connect.
//
// Deprecated: use conformance.Connect.
func Connect(t testing.TB, impl scheduler.Scheduler) scheduler.Scheduler {
	t.Helper()
	return conformance.Connect(t, impl)
}

// Conformance runs the conformance kit against impl's first job type.
//
// Deprecated: use conformance.Run(t, impl, conformance.Options{}).
func Conformance(t *testing.T, impl scheduler.Scheduler) {
	t.Helper()
	conformance.Run(t, impl, conformance.Options{})
}

// Request returns a small, valid ScheduleRequest for a new job of type
// jobType: one task group of count 2 running a raw_exec task, three ready
// nodes with room for it, and a pending job-register eval. Tests start from
// it and change what they exercise.
//
// Deprecated: use conformance.NewBuilder, which keeps nodes, job and
// allocations consistent.
func Request(jobType string) *schedulerpb.ScheduleRequest {
	const (
		jobID = "conformance"
		ns    = "default"
	)
	nodes := make([]*schedulerpb.Node, 3)
	for i := range nodes {
		nodes[i] = &schedulerpb.Node{
			Id:            fmt.Sprintf("00000000-0000-0000-0000-00000000000%d", i+1),
			Name:          fmt.Sprintf("node-%d", i+1),
			Datacenter:    "dc1",
			NodePool:      "default",
			ComputedClass: "v1:1",
			Status:        "ready",
			Eligible:      true,
			Attributes:    map[string]string{"kernel.name": "linux", "unique.hostname": fmt.Sprintf("node-%d", i+1)},
			Drivers:       []string{"raw_exec"},
			Capacity:      &schedulerpb.Resources{Cpu: 4000, MemoryMb: 8192, DiskMb: 100000},
			Used:          &schedulerpb.Resources{},
		}
	}
	return &schedulerpb.ScheduleRequest{
		Eval: &schedulerpb.Evaluation{
			Id:             "11111111-2222-3333-4444-555555555555",
			Namespace:      ns,
			Priority:       50,
			Type:           jobType,
			TriggeredBy:    "job-register",
			JobId:          jobID,
			JobModifyIndex: 10,
			Status:         "pending",
		},
		Job: &schedulerpb.Job{
			Id:             jobID,
			Name:           jobID,
			Namespace:      ns,
			Type:           jobType,
			Priority:       50,
			Datacenters:    []string{"dc1"},
			NodePool:       "default",
			JobModifyIndex: 10,
			TaskGroups: []*schedulerpb.TaskGroup{{
				Name:            "group",
				Count:           2,
				EphemeralDiskMb: 300,
				Tasks: []*schedulerpb.Task{{
					Name:       "task",
					Driver:     "raw_exec",
					ConfigJson: []byte(`{"command":"/bin/true"}`),
					Resources:  &schedulerpb.Resources{Cpu: 100, MemoryMb: 64},
				}},
			}},
		},
		Nodes:   nodes,
		Config:  &schedulerpb.SchedulerConfig{},
		Attempt: 1,
	}
}

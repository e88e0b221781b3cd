// Package servertest holds the fixtures the tests of core/server and its
// subpackages share: a node that fits everything they place, and a
// one-task job.
package servertest

import (
	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
)

// Node is a ready-to-register linux node of 4000 MHz, 8192 MB and 100 GB
// in dc1 with a healthy raw_exec driver; its status is unset.
func Node(name string) *structs.Node {
	return &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: name, Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": name},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk: structs.NodeDiskResources{DiskMB: 100000},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
	}
}

// Job is a job of type typ in dc1 with one group "g" of count 1 and one
// raw_exec task "t" (100 MHz, 64 MB) running /bin/true, carrying the type
// declaration b (nil: none).
func Job(id, typ string, b *structs.JobTypeBehavior) *structs.Job {
	return &structs.Job{
		ID: id, Type: typ, Datacenters: []string{"dc1"}, TypeBehavior: b,
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 64}}},
		}},
	}
}

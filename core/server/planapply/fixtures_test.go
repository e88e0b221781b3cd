package planapply

import (
	"github.com/google/uuid"

	"github.com/drover-org/drover/core/structs"
	"github.com/drover-org/drover/plugins/builtin"
)

// testNode is a node of 4000 MHz, 8192 MB and 100 GB, status unset.
func testNode(name string) *structs.Node {
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

// testJob is a one-group job of type typ with the built-in declaration of
// typ, as the leader stamps it on registration.
func testJob(id, typ string) *structs.Job {
	var b *structs.JobTypeBehavior
	if d, ok := (builtin.InProcess{}).JobType(typ); ok {
		b = &d
	}
	return &structs.Job{
		ID: id, Type: typ, Datacenters: []string{"dc1"}, TypeBehavior: b,
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 64}}},
		}},
	}
}

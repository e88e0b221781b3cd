package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// TestNodeLegacyResources: GET /v1/node/<id> decodes into the official
// client's api.Node with Resources and Reserved set and every number
// present, so the arithmetic Nomad 1.6's `node status <id>` does on them
// through unchecked pointers (Resources minus Reserved) works, also for a
// node that fingerprinted nothing and reserved nothing.
func TestNodeLegacyResources(t *testing.T) {
	api, fake := newTestAPI(t, Config{})
	seedNode(t, fake.store, 5, &structs.Node{ID: "node-full", Name: "full", Datacenter: "dc1", NodePool: "default", Status: "ready",
		NodeResources: &structs.NodeResources{Cpu: structs.NodeCpuResources{CpuShares: 4000, TotalCpuCores: 4},
			Memory: structs.NodeMemoryResources{MemoryMB: 8192}, Disk: structs.NodeDiskResources{DiskMB: 10000},
			Networks: []*structs.NetworkResource{{Device: "eth0", IP: "10.0.0.5", CIDR: "10.0.0.5/32", MBits: 1000}}},
		ReservedResources: &structs.NodeReservedResources{Cpu: structs.NodeReservedCpuResources{CpuShares: 500},
			Memory: structs.NodeReservedMemoryResources{MemoryMB: 256}, Disk: structs.NodeReservedDiskResources{DiskMB: 100}}})
	seedNode(t, fake.store, 6, &structs.Node{ID: "node-bare", Name: "bare", Datacenter: "dc1", NodePool: "default", Status: "initializing"})

	tests := []struct {
		id                      string
		cpu, mem, disk, cores   int
		resCPU, resMem, resDisk int
		networks                int
	}{
		{id: "node-full", cpu: 4000, mem: 8192, disk: 10000, resCPU: 500, resMem: 256, resDisk: 100, networks: 1},
		{id: "node-bare"},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			rec := do(t, api.Handler(), http.MethodGet, "/v1/node/"+tc.id, "")
			if rec.Code != http.StatusOK {
				t.Fatalf("GET node: %d %s", rec.Code, rec.Body)
			}
			var n nomadapi.Node
			if err := json.Unmarshal(rec.Body.Bytes(), &n); err != nil {
				t.Fatalf("decode into api.Node: %v", err)
			}
			if n.Resources == nil || n.Reserved == nil {
				t.Fatalf("Resources %v, Reserved %v: want both set", n.Resources, n.Reserved)
			}
			r, res := n.Resources, n.Reserved
			for name, p := range map[string]*int{"Resources.CPU": r.CPU, "Resources.MemoryMB": r.MemoryMB, "Resources.DiskMB": r.DiskMB,
				"Reserved.CPU": res.CPU, "Reserved.MemoryMB": res.MemoryMB, "Reserved.DiskMB": res.DiskMB, "Resources.Cores": r.Cores} {
				if p == nil {
					t.Fatalf("%s is absent from the JSON: %s", name, rec.Body)
				}
			}
			// What `nomad node status <id>` computes (the node's
			// schedulable total).
			if got, want := *r.CPU-*res.CPU, tc.cpu-tc.resCPU; got != want {
				t.Errorf("CPU total %d, want %d", got, want)
			}
			if got, want := *r.MemoryMB-*res.MemoryMB, tc.mem-tc.resMem; got != want {
				t.Errorf("memory total %d, want %d", got, want)
			}
			if got, want := *r.DiskMB-*res.DiskMB, tc.disk-tc.resDisk; got != want {
				t.Errorf("disk total %d, want %d", got, want)
			}
			if *r.Cores != tc.cores || len(r.Networks) != tc.networks {
				t.Errorf("Cores %d networks %d, want %d and %d", *r.Cores, len(r.Networks), tc.cores, tc.networks)
			}
			// The new-style blocks are still there.
			if tc.cpu > 0 && (n.NodeResources == nil || n.NodeResources.Cpu.CpuShares != int64(tc.cpu)) {
				t.Errorf("NodeResources %+v", n.NodeResources)
			}
		})
	}
}

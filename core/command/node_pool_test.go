package command

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func TestNodePoolCommands(t *testing.T) {
	f := newFakeAgent(t)
	f.json("GET /v1/node/pools", []map[string]any{
		{"Name": "default", "Description": "Default node pool."},
		{"Name": "all", "Description": "Node pool with all nodes in the cluster."},
		{"Name": "gpu", "Description": "GPU nodes"},
	})
	f.json("GET /v1/node/pool/gpu", map[string]any{"Name": "gpu", "Description": "GPU nodes",
		"Meta": map[string]string{"team": "ml", "cost": "high"}, "SchedulerConfiguration": map[string]any{"SchedulerAlgorithm": "spread"}})
	f.fail("GET /v1/node/pool/nope", http.StatusNotFound, "node pool not found")
	f.json("PUT /v1/node/pools", map[string]any{"Index": 9})
	f.json("DELETE /v1/node/pool/gpu", map[string]any{"Index": 10})
	f.fail("DELETE /v1/node/pool/default", http.StatusBadRequest, `node pool "default": deleting a built-in node pool is not allowed`)
	f.json("GET /v1/node/pool/gpu/nodes", []*structs.NodeListStub{{ID: "f7476465-4d6e-c0de-26d0-e383c49be941", Name: "client-1",
		Datacenter: "dc1", NodePool: "gpu", Status: "ready", SchedulingEligibility: "eligible"}})
	f.json("GET /v1/node/pool/empty/nodes", []*structs.NodeListStub{})
	f.json("GET /v1/node/pool/gpu/jobs", []*structs.JobListStub{{ID: "train", Namespace: "ml", Type: "batch", Priority: 50, Status: "running"}})

	r := f.run(t, "", "node", "pool", "list")
	wantCode(t, r, 0)
	want := "Name     Description\nall      Node pool with all nodes in the cluster.\ndefault  Default node pool.\ngpu      GPU nodes\n"
	if r.out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.out, want)
	}
	r = f.run(t, "", "node", "pool", "list", "-prefix", "g", "-json")
	wantCode(t, r, 0)
	if q := f.request("GET /v1/node/pools").Query; !strings.Contains(q, "prefix=g") {
		t.Errorf("list -prefix sent query %q", q)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.out), &listed); err != nil || len(listed) != 3 {
		t.Errorf("list -json: %v\n%s", err, r.out)
	}

	r = f.run(t, "", "node", "pool", "info", "gpu")
	wantCode(t, r, 0)
	wantContains(t, "info", r.out, "Name        = gpu", "Description = GPU nodes", "Metadata\ncost = high\nteam = ml",
		"Scheduler Configuration\nScheduler Algorithm = spread")
	r = f.run(t, "", "node", "pool", "info", "-json", "gpu")
	wantCode(t, r, 0)
	wantContains(t, "info -json", r.out, `"Name": "gpu"`)
	r = f.run(t, "", "node", "pool", "info", "nope")
	wantCode(t, r, 1)
	wantContains(t, "info missing", r.errOut, "node pool not found")

	r = f.run(t, "", "node", "pool", "nodes", "gpu")
	wantCode(t, r, 0)
	wantContains(t, "nodes", r.out, "ID        Node Pool  DC   Name      Class   Drain  Eligibility  Status", "f7476465  gpu        dc1  client-1  <none>  false  eligible     ready")
	r = f.run(t, "", "node", "pool", "nodes", "empty")
	wantCode(t, r, 0)
	wantContains(t, "nodes of an empty pool", r.out, `No nodes in node pool "empty"`)

	r = f.run(t, "", "node", "pool", "jobs", "gpu")
	wantCode(t, r, 0)
	wantContains(t, "jobs", r.out, "ID     Namespace  Type   Priority  Status   Submit Date", "train  ml         batch  50        running")
	if q := f.request("GET /v1/node/pool/gpu/jobs").Query; !strings.Contains(q, "namespace=%2A") && !strings.Contains(q, "namespace=*") {
		t.Errorf("jobs sent query %q, want every namespace", q)
	}

	r = f.run(t, "", "node", "pool", "delete", "gpu")
	wantCode(t, r, 0)
	wantContains(t, "delete", r.out, `Successfully deleted node pool "gpu"!`)
	r = f.run(t, "", "node", "pool", "delete", "default")
	wantCode(t, r, 1)
	wantContains(t, "delete default", r.errOut, "built-in")

	// apply: Nomad's HCL spec, from a file and from standard input.
	dir := t.TempDir()
	spec := filepath.Join(dir, "pool.hcl")
	if err := os.WriteFile(spec, []byte(`node_pool "prod" {
  description = "Production nodes"
  meta {
    owner = "ops"
  }
  scheduler_config {
    scheduler_algorithm     = "spread"
    memory_oversubscription = "enabled"
  }
}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = f.run(t, "", "node", "pool", "apply", spec)
	wantCode(t, r, 0)
	wantContains(t, "apply", r.out, `Successfully applied node pool "prod"!`)
	var sent structs.NodePool
	if err := json.Unmarshal(f.request("PUT /v1/node/pools").Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Name != "prod" || sent.Description != "Production nodes" || sent.Meta["owner"] != "ops" ||
		sent.SchedulerConfiguration == nil || sent.SchedulerConfiguration.SchedulerAlgorithm != "spread" ||
		sent.SchedulerConfiguration.MemoryOversubscriptionEnabled == nil || !*sent.SchedulerConfiguration.MemoryOversubscriptionEnabled {
		t.Errorf("apply sent %+v", sent)
	}
	r = f.run(t, `{"Name": "batch", "Description": "from JSON", "Meta": {"k": "v"}}`, "node", "pool", "apply", "-")
	wantCode(t, r, 0)
	sent = structs.NodePool{}
	if err := json.Unmarshal(f.request("PUT /v1/node/pools").Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Name != "batch" || sent.Description != "from JSON" || sent.Meta["k"] != "v" {
		t.Errorf("apply JSON sent %+v", sent)
	}
}

// Bad specifications are refused before any request, naming the file,
// line and column and the rule.
func TestNodePoolApplyBadSpec(t *testing.T) {
	f := newFakeAgent(t)
	cases := []struct{ name, src, want string }{
		{"no block", "description = \"x\"\n", "<stdin>:1:1: Unsupported argument"},
		{"empty file", "", "Missing node_pool block"},
		{"bad name", "node_pool \"bad name\" {}\n", `<stdin>:1:11: Invalid node pool name: "bad name"`},
		{"two blocks", "node_pool \"a\" {}\nnode_pool \"b\" {}\n", "<stdin>:2:1: Duplicate node_pool block"},
		{"unknown field", "node_pool \"a\" {\n  quota = \"q\"\n}\n", "<stdin>:2:3: Unsupported argument"},
		{"bad algorithm", "node_pool \"a\" {\n  scheduler_config {\n    scheduler_algorithm = \"random\"\n  }\n}\n", `<stdin>:3:27: Invalid scheduler_algorithm: "random"`},
		{"description type", "node_pool \"a\" {\n  description = 3\n}\n", "<stdin>:2:17: Incorrect attribute value type"},
		{"json unknown", `{"Name": "a", "Quota": "q"}`, `<stdin>:1:`},
		{"json no name", `{"Description": "x"}`, "has no name"},
		{"json bad name", `{"Name": "a b"}`, `Name "a b"`},
	}
	for _, tc := range cases {
		r := f.run(t, tc.src, "node", "pool", "apply", "-")
		if r.code != 1 || !strings.Contains(r.errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", tc.name, r.code, r.errOut, tc.want)
		}
	}
	f.mu.Lock()
	n := len(f.reqs)
	f.mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests sent for refused specifications", n)
	}
}

// A placement that found no node to evaluate names the empty node pool.
func TestFormatAllocMetricsNamesPool(t *testing.T) {
	got := formatAllocMetrics(&structs.AllocMetric{NodePool: "gpu"}, "  ")
	want := "  * No nodes were eligible for evaluation\n  * No nodes are available in node pool \"gpu\""
	if got != want {
		t.Errorf("empty pool:\n%s\nwant:\n%s", got, want)
	}
	got = formatAllocMetrics(&structs.AllocMetric{NodePool: "default", NodesInPool: 2, NodesAvailable: map[string]int{"dc2": 0}}, "")
	want = "* No nodes were eligible for evaluation\n* No nodes are available in datacenter \"dc2\""
	if got != want {
		t.Errorf("empty datacenter:\n%s\nwant:\n%s", got, want)
	}
}

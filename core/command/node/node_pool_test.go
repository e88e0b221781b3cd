package node

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/command/cli"
	"github.com/drover-org/drover/core/command/clitest"
	"github.com/drover-org/drover/core/structs"
)

func TestNodePoolCommands(t *testing.T) {
	f := clitest.NewFakeAgent(t)
	f.JSON("GET /v1/node/pools", []map[string]any{
		{"Name": "default", "Description": "Default node pool."},
		{"Name": "all", "Description": "Node pool with all nodes in the cluster."},
		{"Name": "gpu", "Description": "GPU nodes"},
	})
	f.JSON("GET /v1/node/pool/gpu", map[string]any{"Name": "gpu", "Description": "GPU nodes",
		"Meta": map[string]string{"team": "ml", "cost": "high"}, "SchedulerConfiguration": map[string]any{"SchedulerAlgorithm": "spread"}})
	f.Fail("GET /v1/node/pool/nope", http.StatusNotFound, "node pool not found")
	f.JSON("PUT /v1/node/pools", map[string]any{"Index": 9})
	f.JSON("DELETE /v1/node/pool/gpu", map[string]any{"Index": 10})
	f.Fail("DELETE /v1/node/pool/default", http.StatusBadRequest, `node pool "default": deleting a built-in node pool is not allowed`)
	f.JSON("GET /v1/node/pool/gpu/nodes", []*structs.NodeListStub{{ID: "f7476465-4d6e-c0de-26d0-e383c49be941", Name: "client-1",
		Datacenter: "dc1", NodePool: "gpu", Status: "ready", SchedulingEligibility: "eligible"}})
	f.JSON("GET /v1/node/pool/empty/nodes", []*structs.NodeListStub{})
	f.JSON("GET /v1/node/pool/gpu/jobs", []*structs.JobListStub{{ID: "train", Namespace: "ml", Type: "batch", Priority: 50, Status: "running"}})

	r := f.Run(t, "", "node", "pool", "list")
	clitest.WantCode(t, r, 0)
	want := "Name     Description\nall      Node pool with all nodes in the cluster.\ndefault  Default node pool.\ngpu      GPU nodes\n"
	if r.Out != want {
		t.Errorf("list:\n%s\nwant:\n%s", r.Out, want)
	}
	r = f.Run(t, "", "node", "pool", "list", "-prefix", "g", "-json")
	clitest.WantCode(t, r, 0)
	if q := f.Request("GET /v1/node/pools").Query; !strings.Contains(q, "prefix=g") {
		t.Errorf("list -prefix sent query %q", q)
	}
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.Out), &listed); err != nil || len(listed) != 3 {
		t.Errorf("list -json: %v\n%s", err, r.Out)
	}

	r = f.Run(t, "", "node", "pool", "info", "gpu")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info", r.Out, "Name        = gpu", "Description = GPU nodes", "Metadata\ncost = high\nteam = ml",
		"Scheduler Configuration\nScheduler Algorithm = spread")
	r = f.Run(t, "", "node", "pool", "info", "-json", "gpu")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "info -json", r.Out, `"Name": "gpu"`)
	r = f.Run(t, "", "node", "pool", "info", "nope")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "info missing", r.ErrOut, "node pool not found")

	r = f.Run(t, "", "node", "pool", "nodes", "gpu")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "nodes", r.Out, "ID        Node Pool  DC   Name      Class   Drain  Eligibility  Status", "f7476465  gpu        dc1  client-1  <none>  false  eligible     ready")
	r = f.Run(t, "", "node", "pool", "nodes", "empty")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "nodes of an empty pool", r.Out, `No nodes in node pool "empty"`)

	r = f.Run(t, "", "node", "pool", "jobs", "gpu")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "jobs", r.Out, "ID     Namespace  Type   Priority  Status   Submit Date", "train  ml         batch  50        running")
	if q := f.Request("GET /v1/node/pool/gpu/jobs").Query; !strings.Contains(q, "namespace=%2A") && !strings.Contains(q, "namespace=*") {
		t.Errorf("jobs sent query %q, want every namespace", q)
	}

	r = f.Run(t, "", "node", "pool", "delete", "gpu")
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "delete", r.Out, `Successfully deleted node pool "gpu"!`)
	r = f.Run(t, "", "node", "pool", "delete", "default")
	clitest.WantCode(t, r, 1)
	clitest.WantContains(t, "delete default", r.ErrOut, "built-in")

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
	r = f.Run(t, "", "node", "pool", "apply", spec)
	clitest.WantCode(t, r, 0)
	clitest.WantContains(t, "apply", r.Out, `Successfully applied node pool "prod"!`)
	var sent structs.NodePool
	if err := json.Unmarshal(f.Request("PUT /v1/node/pools").Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Name != "prod" || sent.Description != "Production nodes" || sent.Meta["owner"] != "ops" ||
		sent.SchedulerConfiguration == nil || sent.SchedulerConfiguration.SchedulerAlgorithm != "spread" ||
		sent.SchedulerConfiguration.MemoryOversubscriptionEnabled == nil || !*sent.SchedulerConfiguration.MemoryOversubscriptionEnabled {
		t.Errorf("apply sent %+v", sent)
	}
	r = f.Run(t, `{"Name": "batch", "Description": "from JSON", "Meta": {"k": "v"}}`, "node", "pool", "apply", "-")
	clitest.WantCode(t, r, 0)
	sent = structs.NodePool{}
	if err := json.Unmarshal(f.Request("PUT /v1/node/pools").Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Name != "batch" || sent.Description != "from JSON" || sent.Meta["k"] != "v" {
		t.Errorf("apply JSON sent %+v", sent)
	}
}

// Bad specifications are refused before any request, naming the file,
// line and column and the rule.
func TestNodePoolApplyBadSpec(t *testing.T) {
	f := clitest.NewFakeAgent(t)
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
		r := f.Run(t, tc.src, "node", "pool", "apply", "-")
		if r.Code != 1 || !strings.Contains(r.ErrOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", tc.name, r.Code, r.ErrOut, tc.want)
		}
	}
	f.Mu.Lock()
	n := len(f.Reqs)
	f.Mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests sent for refused specifications", n)
	}
}

// A placement that found no node to evaluate names the empty node pool.
func TestFormatAllocMetricsNamesPool(t *testing.T) {
	got := cli.FormatAllocMetrics(&structs.AllocMetric{NodePool: "gpu"}, "  ")
	want := "  * No nodes were eligible for evaluation\n  * No nodes are available in node pool \"gpu\""
	if got != want {
		t.Errorf("empty pool:\n%s\nwant:\n%s", got, want)
	}
	got = cli.FormatAllocMetrics(&structs.AllocMetric{NodePool: "default", NodesInPool: 2, NodesAvailable: map[string]int{"dc2": 0}}, "")
	want = "* No nodes were eligible for evaluation\n* No nodes are available in datacenter \"dc2\""
	if got != want {
		t.Errorf("empty datacenter:\n%s\nwant:\n%s", got, want)
	}
}

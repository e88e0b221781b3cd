package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/structs"
)

func poolTestServer(t *testing.T) (*server.Server, *nomadapi.Client, string) {
	t.Helper()
	srv := devServer(t, false)
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, ts.URL
}

func poolNode(pool string) *structs.Node {
	return &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n-" + pool, Datacenter: "dc1", NodePool: pool,
		Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": "n1"},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk: structs.NodeDiskResources{DiskMB: 100000},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
	}
}

func poolJob(id, pool string) *nomadapi.Job {
	job := nomadapi.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	if pool != "" {
		job.NodePool = &pool
	}
	tg := nomadapi.NewTaskGroup("g", 1)
	task := nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/true")
	task.Resources = &nomadapi.Resources{CPU: intp(100), MemoryMB: intp(64)}
	job.AddTaskGroup(tg.AddTask(task))
	return job
}

func intp(v int) *int { return &v }

func poolNames(pools []*nomadapi.NodePool) []string {
	var out []string
	for _, p := range pools {
		out = append(out, p.Name)
	}
	return out
}

func wantStatus(t *testing.T, err error, status int, mention string) {
	t.Helper()
	var ue nomadapi.UnexpectedResponseError
	if !errors.As(err, &ue) {
		t.Fatalf("got %v, want an HTTP %d", err, status)
	}
	if ue.StatusCode() != status || !strings.Contains(ue.Body(), mention) {
		t.Fatalf("got %d %q, want %d mentioning %q", ue.StatusCode(), ue.Body(), status, mention)
	}
}

// TestNodePoolsAPI drives the node pool endpoints with the official
// client: the built-in pools, upsert, read, prefix list, blocking list,
// the refusals, and a pool's nodes and jobs.
func TestNodePoolsAPI(t *testing.T) {
	srv, c, _ := poolTestServer(t)
	pools := c.NodePools()

	list, qm, err := pools.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := poolNames(list); !slices.Equal(got, []string{"all", "default"}) {
		t.Fatalf("built-in pools: %v", got)
	}
	if qm.LastIndex == 0 {
		t.Fatal("list answered without an index")
	}

	// A blocking list wakes with the new pool.
	type result struct {
		pools []*nomadapi.NodePool
		index uint64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		l, m, err := pools.List(&nomadapi.QueryOptions{WaitIndex: qm.LastIndex, WaitTime: 30 * time.Second})
		r := result{pools: l, err: err}
		if m != nil {
			r.index = m.LastIndex
		}
		done <- r
	}()
	wm, err := pools.Register(&nomadapi.NodePool{Name: "gpu", Description: "GPU nodes", Meta: map[string]string{"team": "ml"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !slices.Contains(poolNames(r.pools), "gpu") || r.index < wm.LastIndex {
			t.Fatalf("blocking list woke with %v at %d (write at %d)", poolNames(r.pools), r.index, wm.LastIndex)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("blocking list did not wake")
	}

	p, qm, err := pools.Info("gpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Description != "GPU nodes" || p.Meta["team"] != "ml" || p.CreateIndex == 0 || qm.LastIndex != p.ModifyIndex {
		t.Fatalf("info: %+v (index %d)", p, qm.LastIndex)
	}
	if _, err := pools.Register(&nomadapi.NodePool{Name: "gpu-old"}, nil); err != nil {
		t.Fatal(err)
	}
	pref, _, err := pools.PrefixList("gpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := poolNames(pref); !slices.Equal(got, []string{"gpu", "gpu-old"}) {
		t.Fatalf("prefix gpu: %v", got)
	}
	if def, _, err := pools.Info("default", nil); err != nil || def.Name != "default" {
		t.Fatalf("default pool: %+v, %v", def, err)
	}

	// Refusals leave the state as it was.
	before, _, _ := pools.List(nil)
	_, err = pools.Register(&nomadapi.NodePool{Name: "all", Description: "x"}, nil)
	wantStatus(t, err, http.StatusBadRequest, `"all"`)
	_, err = pools.Register(&nomadapi.NodePool{Name: "default", Description: "x"}, nil)
	wantStatus(t, err, http.StatusBadRequest, `"default"`)
	_, err = pools.Register(&nomadapi.NodePool{Name: "bad name!"}, nil)
	wantStatus(t, err, http.StatusBadRequest, "Name")
	_, err = pools.Register(&nomadapi.NodePool{Name: strings.Repeat("a", 129)}, nil)
	wantStatus(t, err, http.StatusBadRequest, "128")
	_, err = pools.Delete("default", nil)
	wantStatus(t, err, http.StatusBadRequest, "built-in")
	_, err = pools.Delete("all", nil)
	wantStatus(t, err, http.StatusBadRequest, "built-in")
	_, err = pools.Delete("nope", nil)
	wantStatus(t, err, http.StatusNotFound, "node pool not found")
	_, _, err = pools.Info("nope", nil)
	wantStatus(t, err, http.StatusNotFound, "node pool not found")
	after, _, _ := pools.List(nil)
	if !slices.Equal(poolNames(before), poolNames(after)) {
		t.Fatalf("refused writes changed the pools: %v -> %v", poolNames(before), poolNames(after))
	}
	if all, _, _ := pools.Info("all", nil); all.Description == "x" {
		t.Fatal("the all pool was modified")
	}

	// A pool's nodes; a pool with a node cannot be deleted.
	ctx := context.Background()
	node := poolNode("gpu")
	if _, err := srv.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Nodes().Register(ctx, poolNode("default")); err != nil {
		t.Fatal(err)
	}
	nodes, _, err := pools.ListNodes("gpu", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].ID != node.ID || nodes[0].NodePool != "gpu" {
		t.Fatalf("nodes of gpu: %+v", nodes)
	}
	if allNodes, _, err := pools.ListNodes("all", nil); err != nil || len(allNodes) != 2 {
		t.Fatalf("nodes of all: %d, %v", len(allNodes), err)
	}
	_, err = pools.Delete("gpu", nil)
	wantStatus(t, err, http.StatusBadRequest, "has nodes")

	// A job naming a missing pool is refused; one in gpu-old is listed
	// and blocks that pool's delete.
	_, _, err = c.Jobs().Register(poolJob("lost", "nope"), nil)
	wantStatus(t, err, http.StatusBadRequest, `"nope"`)
	if j, _, err := c.Jobs().Info("lost", nil); err == nil {
		t.Fatalf("refused job was stored: %+v", j)
	}
	if _, _, err := c.Jobs().Register(poolJob("train", "gpu-old"), nil); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := pools.ListJobs("gpu-old", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != "train" {
		t.Fatalf("jobs of gpu-old: %+v", jobs)
	}
	if d, _, err := pools.ListJobs("default", nil); err != nil || len(d) != 0 {
		t.Fatalf("jobs of default: %d, %v", len(d), err)
	}
	_, err = pools.Delete("gpu-old", nil)
	wantStatus(t, err, http.StatusBadRequest, "non-terminal jobs")
	if _, _, err := c.Jobs().Deregister("train", true, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Delete("gpu-old", nil); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := pools.List(nil); slices.Contains(poolNames(got), "gpu-old") {
		t.Fatal("deleted pool still listed")
	}
}

// TestNodePoolRoutedNotAsNode: /v1/node/pools and /v1/node/pool/... are
// node pools, and a node's allocations are still served next to them.
func TestNodePoolRoutedNotAsNode(t *testing.T) {
	srv, c, _ := poolTestServer(t)
	node := poolNode("")
	if _, err := srv.Nodes().Register(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.NodePools().List(nil); err != nil {
		t.Fatalf("GET /v1/node/pools: %v", err)
	}
	if _, _, err := c.Nodes().Allocations(node.ID, nil); err != nil {
		t.Fatalf("node allocations: %v", err)
	}
	if p, _, err := c.NodePools().Info("allocations", nil); err == nil {
		t.Fatalf("pool named allocations: %+v", p)
	}
}

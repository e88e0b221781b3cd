package httpapi

import (
	"fmt"
	"slices"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// Through Nomad's client: /v1/evaluations pages with per_page and
// next_token in creation order (Nomad's TestEvaluations_List); a bad
// token is a 400; /v1/allocations rows carry AllocatedResources only with
// ?resources=true (TestAllocations_List); /v1/nodes?resources=true gives
// a node that reserves nothing an empty ReservedResources
// (TestNodes_List_Resources).
func TestNomadAPI_PagesAndResources(t *testing.T) {
	h, fake := newTestAPI(t, Config{})
	c := newNomadClient(t, h)
	seedJob(t, fake.store, 5, testJob("default", "web"))
	var ids []string
	for i := range 3 {
		id := fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i)
		ids = append(ids, id)
		seedEval(t, fake.store, uint64(10+i), &structs.Evaluation{ID: id, Namespace: "default", JobID: "web", Status: "complete"})
	}
	var got []string
	opts := &nomadapi.QueryOptions{PerPage: 2}
	for page := 0; ; page++ {
		evals, qm, err := c.Evaluations().List(opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(evals) > 2 {
			t.Fatalf("page %d: %d evals, want at most 2", page, len(evals))
		}
		for _, e := range evals {
			got = append(got, e.ID)
		}
		if qm.NextToken == "" {
			break
		}
		if page > 3 {
			t.Fatal("pages never end")
		}
		opts = &nomadapi.QueryOptions{PerPage: 2, NextToken: qm.NextToken}
	}
	slices.Sort(got) // Nomad's client sorts each page newest first
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("evals over the pages: %v, want %v", got, ids)
	}
	if _, _, err := c.Evaluations().List(&nomadapi.QueryOptions{NextToken: "nonsense"}); err == nil {
		t.Error("a malformed next_token was accepted")
	}

	seedAlloc(t, fake.store, 20, &structs.Allocation{ID: "a1", Namespace: "default", JobID: "web", EvalID: ids[0], NodeID: "n1",
		AllocatedResources: &structs.AllocatedResources{Shared: structs.AllocatedSharedResources{DiskMB: 10}}})
	allocs, _, err := c.Allocations().List(nil)
	if err != nil || len(allocs) != 1 || allocs[0].AllocatedResources != nil {
		t.Fatalf("allocations: %+v, %v; want one without AllocatedResources", allocs, err)
	}
	allocs, _, err = c.Allocations().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
	if err != nil || len(allocs) != 1 || allocs[0].AllocatedResources == nil {
		t.Fatalf("allocations?resources=true: %+v, %v; want AllocatedResources", allocs, err)
	}
	if a, _ := fake.store.AllocByID(nil, "a1"); a.AllocatedResources == nil {
		t.Fatal("listing changed the stored allocation")
	}

	seedNode(t, fake.store, 30, &structs.Node{ID: "n1", Name: "n1", Datacenter: "dc1", Status: "ready", NodeResources: &structs.NodeResources{}})
	nodes, _, err := c.Nodes().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
	if err != nil || len(nodes) != 1 || nodes[0].NodeResources == nil || nodes[0].ReservedResources == nil {
		t.Fatalf("nodes?resources=true: %+v, %v; want both resource blocks", nodes, err)
	}
}

package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// newNomadClient serves h over a real socket and returns Nomad's own API
// client pointed at it.
func newNomadClient(t *testing.T, h *HTTPServer) *nomadapi.Client {
	t.Helper()
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	cfg := nomadapi.DefaultConfig()
	cfg.Address = ts.URL
	c, err := nomadapi.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Nomad's allocation and evaluation lists answer their table's index as it
// is: 0 while the table is empty (Nomad's TestAllocations_List,
// TestEvaluations_List, TestEvaluations_Allocations, TestJobs_Allocations,
// TestJobs_Evaluations assert it); once written, the write's index.
func TestNomadAPI_EmptyListsAnswerIndexZero(t *testing.T) {
	h, fake := newTestAPI(t, Config{})
	c := newNomadClient(t, h)
	seedJob(t, fake.store, 7, testJob("default", "web")) // other tables do not count

	check := func(name string, want uint64, qm *nomadapi.QueryMeta, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if qm.LastIndex != want {
			t.Errorf("%s: LastIndex = %d, want %d", name, qm.LastIndex, want)
		}
	}
	empty := func() {
		_, qm, err := c.Allocations().List(nil)
		check("allocations", 0, qm, err)
		_, qm, err = c.Allocations().PrefixList("ab")
		check("allocations prefix", 0, qm, err)
		_, qm, err = c.Evaluations().List(nil)
		check("evaluations", 0, qm, err)
		_, qm, err = c.Evaluations().Allocations("8E231CF4-CA48-43FF-B694-5801E69E22FA", nil)
		check("evaluation allocations", 0, qm, err)
		_, qm, err = c.Jobs().Allocations("job1", true, nil)
		check("job allocations", 0, qm, err)
		_, qm, err = c.Jobs().Evaluations("job1", nil)
		check("job evaluations", 0, qm, err)
	}
	empty()

	seedEval(t, fake.store, 9, &structs.Evaluation{ID: "e1", Namespace: "default", JobID: "web", Status: "complete"})
	seedAlloc(t, fake.store, 12, &structs.Allocation{ID: "a1", Namespace: "default", JobID: "web", EvalID: "e1", NodeID: "n1"})
	evals, qm, err := c.Evaluations().List(nil)
	check("evaluations after a write", 9, qm, err)
	if len(evals) != 1 {
		t.Errorf("evaluations: %d, want 1", len(evals))
	}
	allocs, qm, err := c.Jobs().Allocations("web", true, nil)
	check("job allocations after a write", 12, qm, err)
	if len(allocs) != 1 {
		t.Errorf("job allocations: %d, want 1", len(allocs))
	}
	// Other lists keep answering at least 1 (Nomad's job list does too).
	_, qm, err = c.Nodes().List(nil)
	check("nodes", 1, qm, err)
}

// Nomad's TestJobs_ScaleInvalidAction: scaling with an empty job ID is a 404,
// without a group a 400 (the
// missing job's 404 needs a server: core/server's tests).
func TestNomadAPI_ScaleInvalidAction(t *testing.T) {
	h, _ := newTestAPI(t, Config{})
	c := newNomadClient(t, h)
	for _, tc := range []struct{ job, group, want string }{
		{"", "", "404"},
		{"i-dont-exist", "", "400"},
		{"", "i-dont-exist", "404"},
	} {
		one := 1
		_, _, err := c.Jobs().Scale(tc.job, tc.group, &one, "reason", false, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Scale(%q, %q) = %v, want an error with %s", tc.job, tc.group, err, tc.want)
		}
	}
}

// Nomad's TestJobs_Parse: parsing without canonicalize leaves the job's
// namespace unset; with it, the namespace is "default".
func TestNomadAPI_ParseNamespace(t *testing.T) {
	h, _ := newTestAPI(t, Config{})
	c := newNomadClient(t, h)
	job, err := c.Jobs().ParseHCL(`job "example" {}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if job.Name == nil || *job.Name != "example" {
		t.Errorf("Name = %v, want example", job.Name)
	}
	if job.Namespace != nil {
		t.Errorf("Namespace = %q, want unset", *job.Namespace)
	}
	canon, err := c.Jobs().ParseHCL(`job "example" {}`, true)
	if err != nil {
		t.Fatal(err)
	}
	if canon.Namespace == nil || *canon.Namespace != "default" {
		t.Errorf("canonicalized Namespace = %v, want default", canon.Namespace)
	}
}

// Nomad's TestNodePools_List: ?per_page pages the pools by name; the next
// token starts the next page.
func TestNomadAPI_NodePoolsPaged(t *testing.T) {
	h, _ := newTestAPI(t, Config{})
	c := newNomadClient(t, h)
	names := func(ps []*nomadapi.NodePool) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	all, _, err := c.NodePools().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(all); strings.Join(got, ",") != "all,default" {
		t.Fatalf("pools %v, want all,default", got)
	}
	page, qm, err := c.NodePools().List(&nomadapi.QueryOptions{PerPage: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(page); strings.Join(got, ",") != "all" || qm.NextToken != "default" {
		t.Fatalf("first page %v next %q, want [all] next default", got, qm.NextToken)
	}
	page, qm, err = c.NodePools().List(&nomadapi.QueryOptions{PerPage: 1, NextToken: qm.NextToken})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(page); strings.Join(got, ",") != "default" || qm.NextToken != "" {
		t.Fatalf("second page %v next %q, want [default] and no next", got, qm.NextToken)
	}
	rec := do(t, h.Handler(), "GET", "/v1/node/pools?per_page=-1", "")
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "per_page") {
		t.Errorf("per_page=-1: %d %q, want 400 naming per_page", rec.Code, rec.Body.String())
	}
}

// Nomad's TestNodes_List_Resources: node stubs carry resources only when
// asked with ?resources=true.
func TestNomadAPI_NodeListResources(t *testing.T) {
	h, fake := newTestAPI(t, Config{})
	c := newNomadClient(t, h)
	seedNode(t, fake.store, 5, &structs.Node{ID: "node-a", SecretID: "secret-a", Name: "a", Datacenter: "dc1", NodePool: "default", Status: "ready",
		NodeResources:     &structs.NodeResources{Memory: structs.NodeMemoryResources{MemoryMB: 2048}},
		ReservedResources: &structs.NodeReservedResources{}})
	plain, _, err := c.Nodes().List(nil)
	if err != nil || len(plain) != 1 {
		t.Fatalf("List = %v, %v", plain, err)
	}
	if plain[0].NodeResources != nil || plain[0].ReservedResources != nil {
		t.Errorf("resources without ?resources=true: %+v", plain[0])
	}
	full, _, err := c.Nodes().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
	if err != nil || len(full) != 1 {
		t.Fatalf("List(resources) = %v, %v", full, err)
	}
	if full[0].NodeResources == nil || full[0].ReservedResources == nil || full[0].NodeResources.Memory.MemoryMB != 2048 {
		t.Errorf("resources=true: NodeResources %+v ReservedResources %+v", full[0].NodeResources, full[0].ReservedResources)
	}
}

package httpapi

import (
	"context"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// isolationServer is a real dev server with one registered node behind the
// HTTP API, and the official client talking to it.
func isolationServer(t *testing.T) *nomadapi.Client {
	t.Helper()
	srv := devServer(t, false)
	ctx := context.Background()
	node := &structs.Node{
		ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n1", Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": "n1"},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk: structs.NodeDiskResources{DiskMB: 100000},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
	}
	if _, err := srv.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func isolationJob(ns string) *nomadapi.Job {
	j := nomadapi.NewSystemJob("web", "web", "global", 50)
	j.Namespace = &ns
	j.Datacenters = []string{"dc1"}
	task := nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/sleep").SetConfig("args", []string{"60"})
	task.Require(&nomadapi.Resources{CPU: ptr(100), MemoryMB: ptr(64)})
	j.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(task))
	return j
}

func ptr[T any](v T) *T { return &v }

// waitEval polls an eval until it is terminal and fails unless it completed.
func waitEval(t *testing.T, c *nomadapi.Client, ns, id string) *nomadapi.Evaluation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ev, _, err := c.Evaluations().Info(id, &nomadapi.QueryOptions{Namespace: ns})
		if err == nil && ev.Status != "pending" && ev.Status != "blocked" {
			if ev.Status != "complete" {
				t.Fatalf("eval %s in %s: %s %s", id, ns, ev.Status, ev.StatusDescription)
			}
			return ev
		}
		if time.Now().After(deadline) {
			t.Fatalf("eval %s in %s not terminal: %+v, %v", id, ns, ev, err)
		}
		<-tick.C
	}
}

// liveAllocs returns the job's allocs whose desired status is run.
func liveAllocs(t *testing.T, c *nomadapi.Client, ns string) []*nomadapi.AllocationListStub {
	t.Helper()
	all, _, err := c.Jobs().Allocations("web", true, &nomadapi.QueryOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var out []*nomadapi.AllocationListStub
	for _, a := range all {
		if a.Namespace != ns {
			t.Errorf("alloc %s of web in %s carries namespace %q", a.ID, ns, a.Namespace)
		}
		if a.DesiredStatus == "run" {
			out = append(out, a)
		}
	}
	return out
}

// The same job ID in two namespaces is two jobs: both run, both list under
// namespace=*, stopping one leaves the other, and a namespace with a job
// cannot be deleted until the job is purged.
func TestSameJobIDInTwoNamespaces(t *testing.T) {
	c := isolationServer(t)
	if _, err := c.Namespaces().Register(&nomadapi.Namespace{Name: "team-a"}, nil); err != nil {
		t.Fatal(err)
	}
	namespaces := []string{"default", "team-a"}
	evals := map[string]string{}
	for _, ns := range namespaces {
		resp, _, err := c.Jobs().Register(isolationJob(ns), &nomadapi.WriteOptions{Namespace: ns})
		if err != nil {
			t.Fatalf("register web in %s: %v", ns, err)
		}
		evals[ns] = resp.EvalID
	}
	if evals["default"] == evals["team-a"] {
		t.Fatalf("both registrations answered eval %s", evals["default"])
	}
	for _, ns := range namespaces {
		ev := waitEval(t, c, ns, evals[ns])
		if ev.Namespace != ns || ev.JobID != "web" {
			t.Errorf("eval of web in %s: namespace %q, job %q", ns, ev.Namespace, ev.JobID)
		}
		if got := liveAllocs(t, c, ns); len(got) != 1 {
			t.Fatalf("web in %s: %d live allocs, want 1", ns, len(got))
		}
	}

	stubs, _, err := c.Jobs().List(&nomadapi.QueryOptions{Namespace: "*"})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range stubs {
		listed = append(listed, s.Namespace+"/"+s.ID)
	}
	sort.Strings(listed)
	if strings.Join(listed, ",") != "default/web,team-a/web" {
		t.Fatalf("jobs under namespace=*: %v", listed)
	}
	allEvals, _, err := c.Evaluations().List(&nomadapi.QueryOptions{Namespace: "*"})
	if err != nil {
		t.Fatal(err)
	}
	evalNS := map[string]string{}
	for _, ev := range allEvals {
		evalNS[ev.ID] = ev.Namespace
	}
	for _, ns := range namespaces {
		if evalNS[evals[ns]] != ns {
			t.Errorf("eval %s listed in namespace %q, want %q", evals[ns], evalNS[evals[ns]], ns)
		}
	}

	if _, err := c.Namespaces().Delete("team-a", nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("delete of team-a holding web: %v, want a 400", err)
	}

	// Stopping team-a/web leaves default/web running.
	stopEval, _, err := c.Jobs().Deregister("web", false, &nomadapi.WriteOptions{Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	waitEval(t, c, "team-a", stopEval)
	if got := liveAllocs(t, c, "team-a"); len(got) != 0 {
		t.Fatalf("stopped web in team-a: %d live allocs", len(got))
	}
	if got := liveAllocs(t, c, "default"); len(got) != 1 {
		t.Fatalf("web in default after stopping team-a's: %d live allocs, want 1", len(got))
	}
	if j, _, err := c.Jobs().Info("web", &nomadapi.QueryOptions{Namespace: "default"}); err != nil || j.Stop == nil || *j.Stop {
		t.Fatalf("default/web after stopping team-a/web: %+v, %v", j, err)
	}
	if _, err := c.Namespaces().Delete("team-a", nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("delete of team-a holding a stopped job: %v, want a 400", err)
	}

	// Purged, the job no longer holds the namespace.
	if _, _, err := c.Jobs().Deregister("web", true, &nomadapi.WriteOptions{Namespace: "team-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Namespaces().Delete("team-a", nil); err != nil {
		t.Fatalf("delete of team-a after purge: %v", err)
	}
	if _, _, err := c.Jobs().Info("web", &nomadapi.QueryOptions{Namespace: "default"}); err != nil {
		t.Fatalf("default/web after deleting team-a: %v", err)
	}
	// Registering into the deleted namespace is refused.
	if _, _, err := c.Jobs().Register(isolationJob("team-a"), &nomadapi.WriteOptions{Namespace: "team-a"}); err == nil ||
		!strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), `namespace \"team-a\" does not exist`) && !strings.Contains(err.Error(), `namespace "team-a" does not exist`) {
		t.Fatalf("register into deleted team-a: %v", err)
	}
}

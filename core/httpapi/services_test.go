package httpapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/server"
	"github.com/drover-org/drover/core/state"
	"github.com/drover-org/drover/core/structs"
)

// seedServices registers a node and job "svc" in ns through the server,
// waits for the alloc's placement, reports it running and registers its
// services (name → tags) as the node's client would: every write goes
// through Raft.
func seedServices(t *testing.T, srv *server.Server, ns string, services map[string][]string) *structs.Allocation {
	t.Helper()
	ctx := context.Background()
	node := &structs.Node{ID: uuid.NewString(), SecretID: uuid.NewString(), Name: "n-" + ns, Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux", "unique.hostname": "n-" + ns},
		NodeResources: &structs.NodeResources{
			Cpu: structs.NodeCpuResources{CpuShares: 4000}, Memory: structs.NodeMemoryResources{MemoryMB: 8192},
			Disk: structs.NodeDiskResources{DiskMB: 100000},
		},
		Drivers: map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}}}
	if _, err := srv.Nodes().Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	job := testJob(ns, "svc")
	job.Datacenters = []string{"dc1"}
	job.TaskGroups[0].Tasks[0].Config = map[string]any{"command": "/bin/sleep"}
	if _, err := srv.Jobs().Register(ctx, job, false, 0); err != nil {
		t.Fatal(err)
	}
	var a *structs.Allocation
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for a == nil {
		allocs, err := srv.State().AllocsByNode(nil, node.ID)
		if err != nil {
			t.Fatal(err)
		}
		// Other jobs' allocs may land on the node too (system jobs).
		for _, x := range allocs {
			if x.Namespace == ns && x.JobID == job.ID {
				a = x
			}
		}
		if a != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job was not placed")
		}
		<-tick.C
	}
	if err := srv.Nodes().UpdateAllocs(ctx, node.ID, node.SecretID, []*structs.Allocation{{ID: a.ID, ClientStatus: structs.AllocClientStatusRunning}}); err != nil {
		t.Fatal(err)
	}
	var regs []*structs.ServiceRegistration
	for name, tags := range services {
		regs = append(regs, &structs.ServiceRegistration{ID: "_nomad-task-" + a.ID + "-g-" + name + "-http", ServiceName: name,
			AllocID: a.ID, Tags: tags, Address: "10.0.0.9", Port: 21000})
	}
	if err := srv.Services().Update(ctx, &structs.ServiceRegistrationNodeArgs{NodeID: node.ID, SecretID: node.SecretID, Upsert: regs}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestServicesNomadAPI lists, reads and deletes registrations of a real
// server through the official client, and blocks on them.
func TestServicesNomadAPI(t *testing.T) {
	srv := devServer(t, false)
	st := srv.State()
	alloc := seedServices(t, srv, structs.DefaultNamespace, map[string][]string{"web": {"b", "a"}, "api": nil})
	h := New(serverConfig(srv, Config{}))
	ts := httptest.NewServer(h.Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	svcs := c.Services()

	list, meta, err := svcs.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Namespace != "default" || len(list[0].Services) != 2 || meta.LastIndex == 0 {
		t.Fatalf("List = %+v (index %d)", list, meta.LastIndex)
	}
	if s := list[0].Services; s[0].ServiceName != "api" || s[1].ServiceName != "web" || strings.Join(s[1].Tags, ",") != "a,b" {
		t.Errorf("services = %+v %+v, want api and web with tags a,b", s[0], s[1])
	}

	regs, _, err := svcs.Get("web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 1 || regs[0].AllocID != alloc.ID || regs[0].Port != 21000 || regs[0].Address != "10.0.0.9" ||
		regs[0].CreateIndex == 0 || regs[0].ModifyIndex != regs[0].CreateIndex || regs[0].JobID != "svc" {
		t.Fatalf("Get = %+v", regs)
	}
	if none, _, err := svcs.Get("nothing", nil); err != nil || len(none) != 0 {
		t.Errorf("Get of an unknown service = %v, %v; want an empty list", none, err)
	}

	// A blocking read of the service wakes when it is deleted.
	type got struct {
		regs []*nomadapi.ServiceRegistration
		meta *nomadapi.QueryMeta
		err  error
	}
	woke := make(chan got, 1)
	idx := st.Index(state.TableServiceRegistrations)
	go func() {
		r, m, err := svcs.Get("web", &nomadapi.QueryOptions{WaitIndex: idx, WaitTime: time.Minute})
		woke <- got{r, m, err}
	}()
	select {
	case g := <-woke:
		t.Fatalf("the blocking read returned before any change: %+v", g)
	case <-time.After(100 * time.Millisecond):
	}
	wm, err := svcs.Delete("web", regs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if wm.LastIndex <= idx {
		t.Errorf("delete index %d, want past %d", wm.LastIndex, idx)
	}
	select {
	case g := <-woke:
		if g.err != nil || len(g.regs) != 0 || g.meta.LastIndex != wm.LastIndex {
			t.Errorf("woken read = %+v, %+v, %v", g.regs, g.meta, g.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the blocking read did not wake on the delete")
	}
	if _, err := svcs.Delete("web", regs[0].ID, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("deleting it again: %v, want a 404", err)
	}
	if _, err := svcs.Delete("web", "x", &nomadapi.WriteOptions{Namespace: "*"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("deleting in every namespace: %v, want a 400", err)
	}
}

func serviceMatrixCases(w *aclWorld) []matrixCase {
	seedServices(w.t.(*testing.T), w.h.srv.(*server.Server), "team", map[string][]string{"web": {"t"}})
	return []matrixCase{
		{"GET /v1/services", "GET", "/v1/services", nil, "---22"},
		{"GET /v1/services", "GET", "/v1/services?namespace=team", nil, "--2-2"},
		{"GET /v1/services", "GET", "/v1/services?namespace=*", nil, "22222"}, // filtered: TestServicesListFiltered
		{"GET /v1/service/{name}", "GET", "/v1/service/web", nil, "---22"},
		{"GET /v1/service/{name}", "GET", "/v1/service/web?namespace=team", nil, "--2-2"},
		{"DELETE /v1/service/{name}/{id}", "DELETE", "/v1/service/web/nope", nil, "----4"},
		{"DELETE /v1/service/{name}/{id}", "DELETE", "/v1/service/web/nope?namespace=team", nil, "--4-4"},
	}
}

// A list of every namespace shows a caller only the namespaces it may
// read jobs in.
func TestServicesListFiltered(t *testing.T) {
	w := newACLWorld(t)
	seedServices(t, w.h.srv.(*server.Server), "team", map[string][]string{"web": nil})
	for caller, want := range map[int]string{callerOtherNS: `"Namespace":"team"`, callerReadOnly: `[]`} {
		status, body := w.do(caller, "GET", "/v1/services?namespace=*", nil)
		if status != 200 || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s, want %s", callerNames[caller], status, body, want)
		}
	}
}

// A job's service blocks come back from /v1/jobs/parse with Nomad's
// names, and a job sent by the official client with a Consul service (its
// default provider) is refused by name.
func TestServicesInJobsNomadAPI(t *testing.T) {
	srv := devServer(t, false)
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	src := `job "shop" {
  datacenters = ["dc1"]
  group "g" {
    network {
      port "http" {}
    }
    service {
      provider = "nomad"
      port     = "http"
      tags     = ["v1"]
      check {
        type     = "http"
        path     = "/health"
        interval = "10s"
        timeout  = "2s"
        check_restart {
          limit = 3
        }
      }
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
      }
    }
  }
}
`
	job, err := c.Jobs().ParseHCL(src, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(job.TaskGroups) != 1 || len(job.TaskGroups[0].Services) != 1 {
		t.Fatalf("parsed groups %+v", job.TaskGroups)
	}
	s := job.TaskGroups[0].Services[0]
	if s.Name != "shop-g" || s.Provider != "nomad" || s.PortLabel != "http" || s.AddressMode != "auto" || len(s.Checks) != 1 {
		t.Fatalf("service = %+v", s)
	}
	ck := s.Checks[0]
	if ck.Path != "/health" || ck.Method != "GET" || ck.Interval != 10*time.Second || ck.CheckRestart == nil || ck.CheckRestart.Limit != 3 {
		t.Errorf("check = %+v", ck)
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatalf("registering the parsed job: %v", err)
	}

	// Nomad's API client sends a service without a provider as
	// "consul" (its default), refused; so is one left empty, unless the
	// servers serve such services (default_service_provider).
	for _, p := range []string{"", "consul"} {
		job.TaskGroups[0].Services[0].Provider = p
		_, _, err = c.Jobs().Register(job, nil)
		if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), `service "shop-g": provider`) || !strings.Contains(err.Error(), "Consul") {
			t.Errorf("a Consul service (provider %q): %v, want a 400 naming the service and Consul", p, err)
		}
	}
}

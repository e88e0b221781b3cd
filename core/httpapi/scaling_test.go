package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

const scaledJobHCL = `job "shop" {
  datacenters = ["dc1"]
  ui {
    description = "The shop"
    link {
      label = "Docs"
      url   = "https://docs.example.com/shop"
    }
  }
  group "web" {
    scaling {
      min = 2
      max = 6
      policy {
        cooldown = "1m"
        check "cpu" {
          source = "nomad-apm"
        }
      }
    }
    task "t" {
      driver = "raw_exec"
      kind   = "frontend"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
      action "ping" {
        command = "/bin/echo"
        args    = ["pong"]
      }
    }
  }
  group "worker" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["60"]
      }
    }
  }
}
`

// A job file's 1.6+ blocks go through Nomad's client as `nomad job run`
// sends them (parse, then register) and come back on the job; its scaling
// block is listed and read on Nomad's scaling policy endpoints, filtered
// by job and type, and shown disabled once the job is stopped.
func TestScalingPoliciesNomadAPI(t *testing.T) {
	srv := devServer(t, false)
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.Jobs().ParseHCLOpts(&nomadapi.JobsParseRequest{JobHCL: scaledJobHCL, Canonicalize: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.Jobs().Info("shop", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.UI == nil || got.UI.Description != "The shop" || len(got.UI.Links) != 1 || got.UI.Links[0].URL != "https://docs.example.com/shop" {
		t.Errorf("ui = %+v", got.UI)
	}
	web := got.TaskGroups[0]
	if *web.Count != 2 || web.Scaling == nil || *web.Scaling.Min != 2 || *web.Scaling.Max != 6 || !*web.Scaling.Enabled {
		t.Fatalf("group web: count %d, scaling %+v", *web.Count, web.Scaling)
	}
	task := web.Tasks[0]
	if task.Kind != "frontend" || len(task.Actions) != 1 || task.Actions[0].Name != "ping" || strings.Join(task.Actions[0].Args, " ") != "pong" {
		t.Errorf("task kind %q actions %+v", task.Kind, task.Actions)
	}

	stubs, meta, err := c.Scaling().ListPolicies(nil)
	if err != nil {
		t.Fatal(err)
	}
	wantID := structs.ScalingPolicyID("default", "shop", "web")
	if len(stubs) != 1 || stubs[0].ID != wantID || !stubs[0].Enabled || stubs[0].Type != "horizontal" ||
		stubs[0].Target["Job"] != "shop" || stubs[0].Target["Group"] != "web" || stubs[0].Target["Namespace"] != "default" || meta.LastIndex == 0 {
		t.Fatalf("policies = %+v (index %d), want the web group's", stubs, meta.LastIndex)
	}
	p, _, err := c.Scaling().GetPolicy(wantID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != wantID || *p.Min != 2 || *p.Max != 6 || !*p.Enabled || p.Policy["cooldown"] != "1m" || p.Policy["check"] == nil || p.CreateIndex == 0 {
		t.Errorf("policy = %+v", p)
	}
	for q, want := range map[string]int{"shop": 1, "other": 0} {
		l, _, err := c.Scaling().ListPolicies(&nomadapi.QueryOptions{Params: map[string]string{"job": q}})
		if err != nil || len(l) != want {
			t.Errorf("policies of job %q: %d (%v), want %d", q, len(l), err, want)
		}
	}
	for q, want := range map[string]int{"horizontal": 1, "vertical": 0} {
		l, _, err := c.Scaling().ListPolicies(&nomadapi.QueryOptions{Params: map[string]string{"type": q}})
		if err != nil || len(l) != want {
			t.Errorf("policies of type %q: %d (%v), want %d", q, len(l), err, want)
		}
	}
	if _, _, err := c.Scaling().GetPolicy("no-such-policy", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown policy: %v, want a 404", err)
	}
	if l, _, err := c.Scaling().ListPolicies(&nomadapi.QueryOptions{Namespace: "*"}); err != nil || len(l) != 1 {
		t.Errorf("policies of every namespace: %d (%v), want 1", len(l), err)
	}

	// A blocking list wakes when the job is stopped, and shows the policy
	// disabled.
	type answer struct {
		stubs []*nomadapi.ScalingPolicyListStub
		err   error
	}
	woke := make(chan answer, 1)
	go func() {
		l, _, err := c.Scaling().ListPolicies(&nomadapi.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 30 * time.Second})
		woke <- answer{l, err}
	}()
	if _, _, err := c.Jobs().Deregister("shop", false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-woke:
		if a.err != nil || len(a.stubs) != 1 || a.stubs[0].Enabled {
			t.Errorf("after the stop: %+v %v, want the policy disabled", a.stubs, a.err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the blocking list did not wake on the stop")
	}
}

// A job sent by Nomad's client with what drover cannot run (a device, a
// disconnect block's lost_after) is refused at submit with a 400 naming
// the field and why, and nothing is written.
func TestUnsupportedBlocksRefusedAtSubmit(t *testing.T) {
	srv := devServer(t, false)
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	hour := time.Hour
	base := func() *nomadapi.Job {
		j := nomadapi.NewBatchJob("gpu", "gpu", "global", 50)
		task := nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/true")
		j.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(task))
		return j
	}
	for _, tc := range []struct {
		name string
		mut  func(j *nomadapi.Job)
		want string
	}{
		{"device", func(j *nomadapi.Job) {
			j.TaskGroups[0].Tasks[0].Require(&nomadapi.Resources{Devices: []*nomadapi.RequestedDevice{{Name: "nvidia/gpu"}}})
		}, `group "g": task "t": resources: device "nvidia/gpu": not supported: drover has no device plugins`},
		{"lost_after", func(j *nomadapi.Job) {
			j.TaskGroups[0].Disconnect = &nomadapi.DisconnectStrategy{LostAfter: &hour}
		}, `group "g": disconnect: lost_after: not supported`},
		{"max_client_disconnect", func(j *nomadapi.Job) {
			//lint:ignore SA1019 the deprecated field is what older job files send
			j.TaskGroups[0].MaxClientDisconnect = &hour
		}, `group "g": max_client_disconnect: not supported`},
		{"count above the scaling max", func(j *nomadapi.Job) {
			j.TaskGroups[0].Count = new(5)
			j.TaskGroups[0].Scaling = &nomadapi.ScalingPolicy{Min: new(int64(1)), Max: new(int64(3))}
		}, `group "g": scaling: the group's count (5) must not be greater than max (3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.State().LatestIndex()
			j := base()
			tc.mut(j)
			_, _, err := c.Jobs().Register(j, nil)
			if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("register: %v, want a 400 saying %q", err, tc.want)
			}
			if after := srv.State().LatestIndex(); after != before {
				t.Errorf("a refused job moved the state from %d to %d", before, after)
			}
			if j, _ := srv.State().JobByID(nil, "default", "gpu"); j != nil {
				t.Errorf("the refused job was stored")
			}
		})
	}
}

func scalingMatrixCases() []matrixCase {
	return []matrixCase{
		{"GET /v1/scaling/policies", "GET", "/v1/scaling/policies", nil, "---22"},
		{"GET /v1/scaling/policies", "GET", "/v1/scaling/policies?namespace=team", nil, "--2-2"},
		{"GET /v1/scaling/policies", "GET", "/v1/scaling/policies?namespace=*", nil, "22222"}, // filtered
		{"GET /v1/scaling/policy/{id}", "GET", "/v1/scaling/policy/nope", nil, "---44"},
		{"GET /v1/scaling/policy/{id}", "GET", "/v1/scaling/policy/nope?namespace=team", nil, "--4-4"},
	}
}

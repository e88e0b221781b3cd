package gc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/base"
	sdkgc "github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/gc/gctest"
	"github.com/drover-org/drover/sdk/gc/golden"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

// configure serves a new collector over in-memory gRPC and puts src, a
// config block's body, in force as the agent does (ConfigSchema, Decode,
// SetConfig). It returns the host-side stub and the field errors.
func configure(t *testing.T, src string) (sdkgc.Collector, base.FieldErrors) {
	t.Helper()
	conn := gctest.ConnectConn(t, New())
	c := base.NewClient(conn)
	spec, err := c.ConfigSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig([]byte(src), "agent.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	js, diags := base.Decode(spec, f.Body)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	errs, err := c.SetConfig(t.Context(), js, Name)
	if err != nil {
		t.Fatal(err)
	}
	return sdkgc.NewGRPCClient(conn), errs
}

// decide decides req through remote and holds the answer to the floor the
// core checks every response against.
func decide(t *testing.T, remote sdkgc.Collector, req *gcpb.DecideRequest) map[string]*gcpb.Decision {
	t.Helper()
	page, err := sdkgc.ValidateRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := remote.Decide(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if err := sdkgc.ValidateResponse(page, resp); err != nil {
		t.Fatal(err)
	}
	out := map[string]*gcpb.Decision{}
	for _, d := range resp.GetDecisions() {
		out[d.GetKind().String()+"/"+d.GetId()] = d
	}
	return out
}

func load(t *testing.T, name string) *gcpb.DecideRequest {
	t.Helper()
	req, err := golden.Load("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestConfigKeepFailedAllocs decides the allocation rules' scenario with
// and without keep_failed_allocs: with it no failed allocation (nor its
// eval) is reaped, and every other decision is unchanged.
func TestConfigKeepFailedAllocs(t *testing.T) {
	req := load(t, "eval_alloc_rules.json")
	failed := map[string]bool{}
	for _, c := range req.GetEvals() {
		for _, a := range c.GetAllocs() {
			if a.GetClientStatus() == sdkgc.ClientFailed {
				failed["OBJECT_KIND_ALLOC/"+a.GetId()] = true
				failed["OBJECT_KIND_EVAL/"+c.GetEval().GetId()] = true
			}
		}
	}
	plain, errs := configure(t, "")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	keeping, errs := configure(t, "keep_failed_allocs = true")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	before, after := decide(t, plain, req), decide(t, keeping, req)
	reapedFailed := 0
	for k, d := range before {
		a := after[k]
		switch {
		case !failed[k]:
			if !proto.Equal(a, d) {
				t.Errorf("%s: %v with keep_failed_allocs, %v without; only failed allocations may change", k, a, d)
			}
		case a.GetAction() == gcpb.Action_ACTION_REAP:
			t.Errorf("%s reaped with keep_failed_allocs: %s", k, a.GetReason())
		case d.GetAction() == gcpb.Action_ACTION_REAP:
			reapedFailed++
		}
	}
	// The scenario must have failed allocations the default reaps, or the
	// test shows nothing.
	if reapedFailed == 0 {
		t.Fatal("the scenario reaps no failed allocation by default")
	}
	if r := after["OBJECT_KIND_ALLOC/failed-no-policy"].GetReason(); r != "failed, kept by keep_failed_allocs" {
		t.Errorf("reason %q", r)
	}
}

// TestConfigMaxReapsPerPage decides a page of six reapable nodes: all go
// unpaced, max_reaps_per_page of them when paced.
func TestConfigMaxReapsPerPage(t *testing.T) {
	req := load(t, "node_gc.json")
	for i := range 5 {
		n := proto.Clone(req.GetNodes()[1]).(*gcpb.Node) // down-long
		n.Id = fmt.Sprintf("down-long-%d", i)
		req.Nodes = append(req.Nodes, n)
	}
	cases := []struct {
		src  string
		reap int
	}{
		{"", 6},
		{"max_reaps_per_page = 0", 6},
		{"max_reaps_per_page = 2", 2},
		{"max_reaps_per_page = 100", 6},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			remote, errs := configure(t, tc.src)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			reaped, paced := 0, 0
			for _, d := range decide(t, remote, req) {
				switch {
				case d.GetAction() == gcpb.Action_ACTION_REAP:
					reaped++
				case strings.HasPrefix(d.GetReason(), "paced: max_reaps_per_page"):
					paced++
				}
			}
			if reaped != tc.reap || paced != 6-tc.reap {
				t.Fatalf("reaped %d and paced %d, want %d and %d", reaped, paced, tc.reap, 6-tc.reap)
			}
		})
	}
}

// TestConfigMaxReapsPacesJobsWhole paces job GC: a job is kept with all
// its evals and allocations, never reaped without them.
func TestConfigMaxReapsPacesJobsWhole(t *testing.T) {
	req := load(t, "job_gc.json")
	page, err := sdkgc.ValidateRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	for max := 1; max <= 3; max++ {
		resp, err := DecideWith(req, Settings{MaxReapsPerPage: max})
		if err != nil {
			t.Fatal(err)
		}
		if err := sdkgc.ValidateResponse(page, resp); err != nil {
			t.Fatal(err)
		}
		// The scenario reaps two jobs unpaced.
		jobs, pacedJobs, pacedOthers := 0, 0, 0
		for _, d := range resp.GetDecisions() {
			paced := strings.HasPrefix(d.GetReason(), "paced: ")
			switch {
			case d.GetKind() != gcpb.ObjectKind_OBJECT_KIND_JOB:
				if paced {
					pacedOthers++
				}
			case d.GetAction() == gcpb.Action_ACTION_REAP:
				jobs++
			case paced:
				pacedJobs++
			}
		}
		if jobs != min(max, 2) || pacedJobs != 2-jobs {
			t.Errorf("max_reaps_per_page %d: %d jobs reaped, %d paced; want %d and %d", max, jobs, pacedJobs, min(max, 2), 2-min(max, 2))
		}
		// A paced job keeps its evals and allocations too.
		if (pacedJobs > 0) != (pacedOthers > 0) {
			t.Errorf("max_reaps_per_page %d: %d jobs paced but %d of their evals and allocations", max, pacedJobs, pacedOthers)
		}
	}
}

func TestConfigRefused(t *testing.T) {
	remote, errs := configure(t, "max_reaps_per_page = -1")
	if len(errs) != 1 || errs[0].GetPath() != "max_reaps_per_page" || !strings.Contains(errs[0].GetMessage(), "must not be negative") {
		t.Fatalf("field errors %v, want max_reaps_per_page: must not be negative", errs)
	}
	// The defaults stay in force.
	req := load(t, "node_gc.json")
	if d := decide(t, remote, req)["OBJECT_KIND_NODE/down-long"]; d.GetAction() != gcpb.Action_ACTION_REAP {
		t.Fatalf("down-long: %v", d)
	}
}

func TestConfigConformance(t *testing.T) {
	gctest.RunConfig(t, New())
}

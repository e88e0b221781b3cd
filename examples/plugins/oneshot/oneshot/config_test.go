package oneshot

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// configure serves s over in-memory gRPC and puts src, the body of the
// plugin's config block, in force as the agent does: it asks for the
// schema, decodes the block against it and sets the result. It returns
// the host-side stub and the fields the plugin refused.
func configure(t *testing.T, s *Scheduler, src string) (scheduler.Scheduler, base.FieldErrors) {
	t.Helper()
	conn := conformance.ConnectConn(t, s)
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
	return scheduler.NewGRPCClient(conn), errs
}

// TestConfigMaxPerNode places a group of four on three nodes: spread, one
// node takes two; with max_per_node = 1 the fourth placement fails and the
// eval blocks.
func TestConfigMaxPerNode(t *testing.T) {
	cases := []struct {
		src    string
		placed int
		failed bool
	}{
		{"", 4, false},
		{"max_per_node = 0", 4, false},
		{"max_per_node = 2", 4, false},
		{"max_per_node = 1", 3, true},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			remote, errs := configure(t, New("test"), tc.src)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			req := conformance.NewBuilder(JobType).Nodes(3).Group("web", 4).Request()
			resp, err := remote.Schedule(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			perNode := map[string]int{}
			for _, a := range resp.GetPlan().GetNodeAllocation() {
				perNode[a.GetNodeId()]++
			}
			placed := len(resp.GetPlan().GetNodeAllocation())
			failed := resp.GetFailedTgAllocs()["web"] != nil
			if placed != tc.placed || failed != tc.failed {
				t.Fatalf("placed %d (%v), failed %v; want %d, failed %v", placed, perNode, failed, tc.placed, tc.failed)
			}
			if failed {
				if n := resp.GetFailedTgAllocs()["web"].GetDimensionExhausted()["max_per_node"]; n != 3 {
					t.Errorf("max_per_node exhausted %d nodes, want 3", n)
				}
				if len(resp.GetBlockedEvals()) != 1 {
					t.Errorf("blocked evals %d, want 1", len(resp.GetBlockedEvals()))
				}
			}
		})
	}
}

func TestConfigRefused(t *testing.T) {
	_, errs := configure(t, New("test"), "max_per_node = -2")
	if len(errs) != 1 || errs[0].GetPath() != "max_per_node" || !strings.Contains(errs[0].GetMessage(), "must not be negative") {
		t.Fatalf("field errors %v, want max_per_node: must not be negative", errs)
	}
}

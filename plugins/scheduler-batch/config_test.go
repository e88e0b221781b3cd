package batch

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/sdk/base"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/conformance"
)

// configure serves s over in-memory gRPC and puts src, a config block's
// body, in force as the agent does (ConfigSchema, Decode, SetConfig). It
// returns the scheduler's host-side stub and the field errors.
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

func TestConfigMaxAttempts(t *testing.T) {
	cases := []struct {
		src  string
		want int32
	}{
		{"", MaxAttempts},
		{"max_attempts = 5", 5},
		{"max_attempts = 10", 10},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			remote, errs := configure(t, New(), tc.src)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			info, err := remote.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := info.GetJobTypes()[0].GetMaxAttempts(); got != tc.want {
				t.Fatalf("max_attempts in Info = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestConfigRefused(t *testing.T) {
	for _, src := range []string{"max_attempts = 0", "max_attempts = 11", "max_attempts = -1"} {
		t.Run(src, func(t *testing.T) {
			s := New()
			remote, errs := configure(t, s, src)
			if len(errs) != 1 || errs[0].GetPath() != "max_attempts" || !strings.Contains(errs[0].GetMessage(), "must be between 1 and 10") {
				t.Fatalf("field errors %v, want max_attempts: must be between 1 and 10", errs)
			}
			// The refused config is not in force.
			info, err := remote.Info(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got := info.GetJobTypes()[0].GetMaxAttempts(); got != MaxAttempts {
				t.Fatalf("max_attempts %d after a refused config, want the default %d", got, MaxAttempts)
			}
		})
	}
}

// TestConfigJobAntiAffinity places a group of three on three empty nodes:
// batch packs them onto one node by default, and spreads them over more
// with job_anti_affinity.
func TestConfigJobAntiAffinity(t *testing.T) {
	cases := []struct {
		src    string
		spread bool
	}{
		{"", false},
		{"job_anti_affinity = false", false},
		{"job_anti_affinity = true", true},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			remote, errs := configure(t, New(), tc.src)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			req := conformance.NewBuilder(JobType).Nodes(3).Group("web", 3).Request()
			resp, err := remote.Schedule(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			on := placedOn(resp)
			total := 0
			for _, n := range on {
				total += n
			}
			if total != 3 || (len(on) > 1) != tc.spread {
				t.Fatalf("placed %v, want 3 allocations, spread over several nodes: %v", on, tc.spread)
			}
		})
	}
}

func TestConfigConformance(t *testing.T) {
	conformance.RunConfig(t, New())
}

package rpc

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/structs"
)

func nestedAny(depth int) any {
	var v any = "leaf"
	for i := 0; i < depth; i++ {
		v = []any{v}
	}
	return v
}

// TestRequestLimits: a request nested deeper than the FSM could read back,
// or larger than a server accepts, is refused at the RPC edge with the
// kind a forwarded HTTP write maps to 400 or 413, naming the limit; the
// handler never runs.
func TestRequestLimits(t *testing.T) {
	srv := NewServer(nil, nil)
	calls := 0
	Handle(srv, "Job.Echo", func(_ context.Context, j *structs.Job) (*structs.Job, error) { calls++; return j, nil })
	ln := listen(t)
	serve(t, srv, ln)
	c := dial(t, ln.Addr().String(), nil)

	withConfig := func(cfg map[string]any) *structs.Job {
		j := testJob()
		j.TaskGroups[0].Tasks[0].Config = cfg
		return j
	}
	tests := []struct {
		name string
		job  *structs.Job
		kind error
		want string
	}{
		{"as deep as the report", withConfig(map[string]any{"args": nestedAny(1100)}), structs.ErrInvalid, "MaxDecodeDepth: 128"},
		{"just past the decode depth", withConfig(map[string]any{"args": nestedAny(structs.MaxDecodeDepth)}), structs.ErrInvalid, "MaxDecodeDepth"},
		{"within the decode depth", withConfig(map[string]any{"args": nestedAny(structs.MaxNestingDepth)}), nil, ""},
		{"over the request size", withConfig(map[string]any{"blob": strings.Repeat("x", structs.MaxRPCRequestBytes)}), structs.ErrTooLarge, "requests up to"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := calls
			_, err := Call[structs.Job, structs.Job](context.Background(), c, "Job.Echo", tc.job)
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("Call = %v", err)
				}
				return
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("Call = %v, want kind %v", err, tc.kind)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			if calls != before {
				t.Error("handler ran for a refused request")
			}
		})
	}
}

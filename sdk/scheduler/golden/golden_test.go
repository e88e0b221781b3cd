package golden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
)

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		wantErr    string
	}{
		{"ok", `{"doc":"d","request":{"eval":{"id":"e"},"nodes":[{"id":"n1"},{"id":"n2","capacity":{"cpu":1}}]}}`, ""},
		{"no doc", `{"request":{}}`, "missing doc"},
		{"unknown field", `{"doc":"d","requets":{}}`, "unknown field"},
		{"bad request", `{"doc":"d","request":{"evall":{}}}`, "request:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := Load(write(t, dir, tc.name+".json", tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load: err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.GetAttempt() != 1 {
				t.Errorf("attempt = %d, want the default 1", req.GetAttempt())
			}
			if got := req.GetNodes()[0].GetCapacity().GetCpu(); got != DefaultCapacity().GetCpu() {
				t.Errorf("node without capacity: cpu %d, want the default %d", got, DefaultCapacity().GetCpu())
			}
			if got := req.GetNodes()[1].GetCapacity().GetCpu(); got != 1 {
				t.Errorf("node with capacity: cpu %d, want its own 1", got)
			}
		})
	}
}

func TestCanonicalIsSortedAndStable(t *testing.T) {
	resp := &schedulerpb.ScheduleResponse{
		QueuedAllocations: map[string]int32{"b": 1, "a": 2},
		Plan:              &schedulerpb.Plan{NodeUpdate: []*schedulerpb.AllocStop{{AllocId: "x", NodeId: "n"}}},
	}
	first, err := Canonical(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{
  "plan": {
    "node_update": [
      {
        "alloc_id": "x",
        "node_id": "n"
      }
    ]
  },
  "queued_allocations": {
    "a": 2,
    "b": 1
  }
}
`
	if string(first) != want {
		t.Errorf("Canonical =\n%s\nwant\n%s", first, want)
	}
	for range 5 {
		again, err := Canonical(resp)
		if err != nil || string(again) != string(first) {
			t.Fatalf("Canonical not stable: %s / %v", again, err)
		}
	}
}

// TestRun runs a scenario dir the way a plugin does, against a golden file
// written from the same function.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "echo.json", `{"doc":"the eval id comes back","request":{"eval":{"id":"e1"}}}`)
	f := func(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
		return &schedulerpb.ScheduleResponse{StatusDescription: req.GetEval().GetId()}, nil
	}
	got, _ := f(&schedulerpb.ScheduleRequest{Eval: &schedulerpb.Evaluation{Id: "e1"}})
	b, err := Canonical(got)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, "echo.golden.json", string(b))
	Run(t, dir, f)
}

// Package goldentest runs scheduler scenario files: a request in, the
// expected response out, both readable JSON, so a change in scheduling
// behaviour shows up in review as a diff of a golden file.
//
// # Format
//
// A scenario is testdata/<name>.json:
//
//	{
//	  "doc": "what the scenario shows, in a sentence or two",
//	  "request": { ...a ScheduleRequest in protojson, proto field names... }
//	}
//
// Two defaults keep scenarios short: a node without "capacity" gets
// DefaultCapacity, and a request without "attempt" is attempt 1. Everything
// else is spelled out.
//
// Its expected outcome is testdata/<name>.golden.json: the ScheduleResponse
// as canonical JSON (proto field names, object keys sorted, two-space
// indent, 64-bit integers as strings as protojson writes them). Run the
// tests with -update to rewrite golden files from the current behaviour,
// then review the diff.
//
// Suite is a plugin's whole test: its scenarios plus the checks every
// scheduler plugin shares.
package goldentest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/proto/schedulerpb"
	"github.com/drover-org/drover/sdk/scheduler"
	"github.com/drover-org/drover/sdk/scheduler/schedulertest"
)

var update = flag.Bool("update", false, "rewrite golden files from the current output")

// DefaultCapacity is the capacity of a scenario node that names none.
func DefaultCapacity() *schedulerpb.Resources {
	return &schedulerpb.Resources{Cpu: 4000, MemoryMb: 8192, DiskMb: 100000}
}

// ScheduleFunc is the scheduler under test.
type ScheduleFunc func(*schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error)

type scenario struct {
	Doc     string          `json:"doc"`
	Request json.RawMessage `json:"request"`
}

// Load reads a scenario file and returns its request with defaults applied.
func Load(path string) (*schedulerpb.ScheduleRequest, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sc scenario
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if sc.Doc == "" {
		return nil, fmt.Errorf("%s: missing doc", path)
	}
	req := &schedulerpb.ScheduleRequest{}
	if err := protojson.Unmarshal(sc.Request, req); err != nil {
		return nil, fmt.Errorf("%s: request: %w", path, err)
	}
	for _, n := range req.GetNodes() {
		if n.Capacity == nil {
			n.Capacity = DefaultCapacity()
		}
	}
	if req.Attempt == 0 {
		req.Attempt = 1
	}
	return req, nil
}

// Canonical renders a message as canonical JSON: proto field names, keys
// sorted, indented. protojson alone deliberately varies its whitespace.
func Canonical(m proto.Message) ([]byte, error) {
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		return nil, err
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// Run runs every scenario in dir against f and compares with its golden
// file, rewriting it under -update. It fails if dir holds no scenario.
func Run(t *testing.T, dir string, f ScheduleFunc) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range paths {
		if strings.HasSuffix(path, ".golden.json") {
			continue
		}
		n++
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			runOne(t, path, f)
		})
	}
	if n == 0 {
		t.Fatalf("no scenarios in %s", dir)
	}
}

// Suite tests a scheduler plugin that serves one job type: Info reports
// exactly want, Schedule refuses a canceled context, the plugin passes
// schedulertest.Conformance, and every scenario in dir matches its golden
// file (see Run). Each part is a subtest named Info, CanceledContext,
// Conformance and Golden.
func Suite(t *testing.T, s scheduler.Scheduler, dir string, want *schedulerpb.InfoResponse) {
	t.Helper()
	if len(want.GetJobTypes()) != 1 {
		t.Fatalf("goldentest: Suite wants one job type, got %v", want.GetJobTypes())
	}
	t.Run("Info", func(t *testing.T) {
		got, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Errorf("Info = %v, want %v", got, want)
		}
	})
	t.Run("CanceledContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := s.Schedule(ctx, schedulertest.Request(want.GetJobTypes()[0].GetName())); !errors.Is(err, context.Canceled) {
			t.Fatalf("Schedule with a canceled context: err = %v, want context.Canceled", err)
		}
	})
	t.Run("Conformance", func(t *testing.T) {
		schedulertest.Conformance(t, s)
	})
	t.Run("Golden", func(t *testing.T) {
		Run(t, dir, func(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
			return s.Schedule(t.Context(), req)
		})
	})
}

func runOne(t *testing.T, path string, f ScheduleFunc) {
	req, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f(req)
	if err != nil {
		t.Fatalf("schedule: %v", err)
	}
	got, err := Canonical(resp)
	if err != nil {
		t.Fatal(err)
	}
	golden := strings.TrimSuffix(path, ".json") + ".golden.json"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("response differs from %s (run with -update to accept):\n%s", golden, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the lines that differ, enough to read a failure without a
// diff tool.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
		}
	}
	return b.String()
}

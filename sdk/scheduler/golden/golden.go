// Package golden runs scheduler scenario files against a scheduler plugin:
// a request in, the expected response out, both readable JSON, so that a
// change in scheduling behaviour shows up in review as the diff of a golden
// file. It complements package conformance, which checks the rules every
// scheduler keeps; golden files pin what one scheduler decides.
//
// A plugin's test:
//
//	func TestGolden(t *testing.T) {
//		s := myplugin.New()
//		golden.Run(t, "testdata", func(req *schedulerpb.ScheduleRequest) (*schedulerpb.ScheduleResponse, error) {
//			return s.Schedule(t.Context(), req)
//		})
//	}
//
// # Scenario files
//
// A scenario is testdata/<name>.json, one JSON object with exactly two
// fields (unknown fields are an error, so a typo does not pass silently):
//
//	{
//	  "doc": "what the scenario shows, in a sentence or two",
//	  "request": { ...a ScheduleRequest in protojson... }
//	}
//
// "doc" is required: a scenario nobody can explain cannot be reviewed.
// "request" is a drover.scheduler.v1.ScheduleRequest as protojson reads it:
// field names as in sdk/proto/scheduler.proto (job_modify_index; the
// lowerCamel JSON names are accepted too), 64-bit integers as strings or
// numbers, bytes (a task's config_json) in base64. Two
// defaults keep scenarios short: a node without "capacity" gets
// DefaultCapacity, and a request without "attempt" is attempt 1.
// Everything else is spelled out; in particular a node's "used" must count
// the job's live allocations on it, as the core's would.
//
// # Golden files
//
// The expected outcome of testdata/<name>.json is testdata/<name>.golden.json:
// the ScheduleResponse as canonical JSON (see Canonical): proto field names,
// object keys sorted, two-space indent, a final newline, 64-bit integers as
// strings as protojson writes them, fields at their zero value left out.
// Canonical output makes equal responses byte-equal, so the comparison is
// exact and a failure prints the differing lines.
//
// Run the tests with -update to write every golden file from the current
// behaviour (go test ./plugins/myplugin -run TestGolden -update), then
// review the diff before committing it. A missing golden file fails the
// test and says to run -update.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/internal/goldenfile"
	"github.com/drover-org/drover/sdk/proto/schedulerpb"
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
	goldenfile.Check(t, strings.TrimSuffix(path, ".json")+".golden.json", got, *update)
}

// Package golden runs GC scenario files against a GC plugin: a page in, the
// decisions out, both readable JSON, so that a change in what is reaped
// shows up in review as the diff of a golden file.
//
// A plugin's test:
//
//	func TestGolden(t *testing.T) {
//		c := mygc.New()
//		golden.Run(t, "testdata", func(req *gcpb.DecideRequest) (*gcpb.DecideResponse, error) {
//			return c.Decide(t.Context(), req)
//		})
//	}
//
// # Scenario files
//
// A scenario is testdata/<name>.json, one JSON object with exactly two
// fields (unknown fields are an error):
//
//	{
//	  "doc": "what the scenario shows, in a sentence or two",
//	  "request": { ...a DecideRequest in protojson... }
//	}
//
// "request" is a drover.gc.v1.DecideRequest as protojson reads it (field
// names as in sdk/proto/gc.proto, enums by name, 64-bit integers as strings
// or numbers). Two defaults keep scenarios short: a request without
// "thresholds" gets gc.DefaultThresholds, and one without "now_unix_nano"
// gets Now. So that a scenario reads at a glance, a field whose name ends
// in _unix_nano may be written relative to the request's now as a string:
// "now", "now-25h", "now+90s" (any time.ParseDuration duration).
//
// # Golden files
//
// The expected outcome of testdata/<name>.json is
// testdata/<name>.golden.json: the DecideResponse as canonical JSON (proto
// field names, keys sorted, two-space indent, final newline, zero values
// left out). Every response is also held to gc.ValidateResponse, so a
// golden file can never pin a decision below the safety floor.
//
// Run the tests with -update to rewrite every golden file from the current
// behaviour, then review the diff before committing it.
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
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/drover-org/drover/sdk/gc"
	"github.com/drover-org/drover/sdk/internal/goldenfile"
	"github.com/drover-org/drover/sdk/proto/gcpb"
)

var update = flag.Bool("update", false, "rewrite golden files from the current output")

// Now is the clock of a scenario that sets none: 2026-01-01T00:00:00Z.
var Now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DecideFunc is the plugin under test.
type DecideFunc func(*gcpb.DecideRequest) (*gcpb.DecideResponse, error)

type scenario struct {
	Doc     string          `json:"doc"`
	Request json.RawMessage `json:"request"`
}

// Load reads a scenario file and returns its request with defaults applied.
func Load(path string) (*gcpb.DecideRequest, error) {
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
	body, err := resolveTimes(sc.Request)
	if err != nil {
		return nil, fmt.Errorf("%s: request: %w", path, err)
	}
	req := &gcpb.DecideRequest{}
	if err := protojson.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("%s: request: %w", path, err)
	}
	if req.Thresholds == nil {
		req.Thresholds = gc.DefaultThresholds()
	}
	return req, nil
}

// resolveTimes rewrites "now±duration" values of *_unix_nano fields as
// numbers, against the request's own now_unix_nano (Now when unset, which
// is also written into the request).
func resolveTimes(raw json.RawMessage) ([]byte, error) {
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	now := Now.UnixNano()
	switch n := v["now_unix_nano"].(type) {
	case nil:
		v["now_unix_nano"] = json.Number(fmt.Sprint(now))
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			return nil, fmt.Errorf("now_unix_nano: %w", err)
		}
		now = i
	default:
		return nil, fmt.Errorf("now_unix_nano must be a number")
	}
	var walk func(any) error
	walk = func(x any) error {
		switch x := x.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && strings.HasSuffix(k, "_unix_nano") {
					t, err := relative(s, now)
					if err != nil {
						return fmt.Errorf("%s: %w", k, err)
					}
					x[k] = json.Number(fmt.Sprint(t))
					continue
				}
				if err := walk(val); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func relative(s string, now int64) (int64, error) {
	rest, ok := strings.CutPrefix(s, "now")
	if !ok {
		return 0, fmt.Errorf("%q is neither a number nor now±duration", s)
	}
	if rest == "" {
		return now, nil
	}
	d, err := time.ParseDuration(rest)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return now + int64(d), nil
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

// Run runs every scenario in dir against f, checks each response with
// gc.ValidateResponse and compares it with its golden file, rewriting it
// under -update. It fails if dir holds no scenario.
func Run(t *testing.T, dir string, f DecideFunc) {
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
		t.Run(strings.TrimSuffix(filepath.Base(path), ".json"), func(t *testing.T) {
			runOne(t, path, f)
		})
	}
	if n == 0 {
		t.Fatalf("no scenarios in %s", dir)
	}
}

func runOne(t *testing.T, path string, f DecideFunc) {
	req, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	page, err := gc.ValidateRequest(req)
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	resp, err := f(req)
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	if err := gc.ValidateResponse(page, resp); err != nil {
		t.Fatalf("response: %v", err)
	}
	got, err := Canonical(resp)
	if err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, strings.TrimSuffix(path, ".json")+".golden.json", got, *update)
}

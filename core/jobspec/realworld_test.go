package jobspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestRealWorld parses job files shaped as Nomad users write them, one or
// more for each block of Nomad 1.6's jobspec (testdata/realworld/*.hcl),
// and compares the job field by field with the structure Nomad's parser
// gives (testdata/realworld/*.json: Nomad's field names, its defaults, a
// null for a block the file leaves out). The expectations are written
// from Nomad's documentation (NOMAD-BEHAVIOR.md and the jobspec pages),
// not produced by Nomad's code; `go test -update` rewrites them from the
// parser, for review.
func TestRealWorld(t *testing.T) {
	files, err := filepath.Glob("testdata/realworld/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("expected at least 8 real-world job files, found %d", len(files))
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			job, err := ParseWith(filepath.Base(in), src, testOptions)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(job); err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(in, ".hcl") + ".json"
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			wantSrc, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading expectations (run go test -update to create them): %v", err)
			}
			var got, want any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(wantSrc, &want); err != nil {
				t.Fatalf("%s: %v", golden, err)
			}
			for _, d := range jsonDiff("Job", got, want) {
				t.Error(d)
			}
		})
	}
}

// jsonDiff lists, by path, every field where got differs from want
// (decoded JSON values).
func jsonDiff(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want an object", path, short(got))}
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		var out []string
		for _, k := range names {
			gv, gok := g[k]
			wv, wok := w[k]
			switch {
			case !gok:
				out = append(out, fmt.Sprintf("%s.%s: missing, want %s", path, k, short(wv)))
			case !wok:
				out = append(out, fmt.Sprintf("%s.%s: got %s, not expected", path, k, short(gv)))
			default:
				out = append(out, jsonDiff(path+"."+k, gv, wv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %s, want %s", path, short(got), short(want))}
		}
		var out []string
		for i := range w {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(got, want) {
		return []string{fmt.Sprintf("%s: got %s, want %s", path, short(got), short(want))}
	}
	return nil
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}

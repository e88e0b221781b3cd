package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// TestJobspecCorpus parses the job files of testdata/corpus, written after
// the shapes of public real-world job files (testdata/corpus/SOURCES.md),
// through /v1/jobs/parse with the official client, as `nomad job run`
// would, and compares the answer field by field with what Nomad answers
// for the same file (<name>.nomad.json: the fields a scheduler or client
// reads, with Nomad's documented canonical defaults). A parsed job is
// then registered, so every file either parses and is accepted, or is
// refused with a reason: a file with <name>.refused instead parses, as
// Nomad parses it, and its registration must be refused with an error
// holding each line of it (the block and the integration it names; a
// line "a || b" holds alternatives), or it is refused at parse time
// with such an error.
func TestJobspecCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	// A server that knows the docker driver too: the corpus runs both.
	srv := devServerDrivers(t, false, "raw_exec", "docker")
	ts := httptest.NewServer(New(serverConfig(srv, Config{})).Handler())
	t.Cleanup(ts.Close)
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	var parsed, refused int
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".hcl")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			job, perr := c.Jobs().ParseHCLOpts(&nomadapi.JobsParseRequest{JobHCL: string(src), Canonicalize: true})
			if want, err := os.ReadFile(strings.TrimSuffix(f, ".hcl") + ".refused"); err == nil {
				refused++
				err := perr
				if err == nil {
					_, _, err = c.Jobs().Register(job, nil)
				}
				if err == nil {
					t.Fatalf("registered, want a refusal naming %q", strings.TrimSpace(string(want)))
				}
				for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
					found := false
					for _, alt := range strings.Split(line, " || ") {
						found = found || strings.Contains(err.Error(), alt)
					}
					if !found {
						t.Errorf("refusal %q does not say %q", err, line)
					}
				}
				return
			}
			if perr != nil {
				t.Fatalf("parse: %v", perr)
			}
			parsed++
			raw, err := os.ReadFile(strings.TrimSuffix(f, ".hcl") + ".nomad.json")
			if err != nil {
				t.Fatalf("no %s.nomad.json nor .refused: %v", name, err)
			}
			var want any
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("%s.nomad.json: %v", name, err)
			}
			b, err := json.Marshal(job)
			if err != nil {
				t.Fatal(err)
			}
			var got any
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for _, d := range subsetDiff("Job", want, got) {
				t.Error(d)
			}
			if _, _, err := c.Jobs().Register(job, nil); err != nil {
				t.Errorf("registering the parsed job: %v", err)
			}
		})
	}
	if parsed == 0 || refused == 0 {
		t.Errorf("corpus of %d parsed and %d refused files: both kinds are needed", parsed, refused)
	}
}

// subsetDiff lists where got differs from want on the fields want has:
// objects compare the keys want names, arrays element by element and
// their length, anything else by value (JSON numbers as float64).
func subsetDiff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want an object", path, short(got))}
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var out []string
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing, want %s", path, k, short(w[k])))
				continue
			}
			out = append(out, subsetDiff(path+"."+k, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %s, want %s", path, short(got), short(want))}
		}
		var out []string
		for i := range w {
			out = append(out, subsetDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if want != got {
			return []string{fmt.Sprintf("%s: got %s, want %s", path, short(got), short(want))}
		}
		return nil
	}
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func TestSubsetDiff(t *testing.T) {
	var want, got any
	_ = json.Unmarshal([]byte(`{"A":1,"B":[{"C":"x"}],"D":{"E":true}}`), &want)
	_ = json.Unmarshal([]byte(`{"A":1,"B":[{"C":"y","Z":2}],"D":{"E":false},"F":3}`), &got)
	d := subsetDiff("Job", want, got)
	if len(d) != 2 || !strings.Contains(d[0], "Job.B[0].C") || !strings.Contains(d[1], "Job.D.E") {
		t.Errorf("diff = %q", d)
	}
	if d := subsetDiff("Job", want, want); len(d) != 0 {
		t.Errorf("diff of a value with itself = %q", d)
	}
	_ = json.Unmarshal([]byte(`{"A":1,"B":[],"D":{"E":true}}`), &got)
	if d := subsetDiff("Job", want, got); len(d) != 1 || !strings.Contains(d[0], "Job.B") {
		t.Errorf("diff of a shorter array = %q", d)
	}
}

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

// TestRealWorldRegistration: what drover cannot run in the real-world
// files parses and is refused by validation (`job validate`, and the
// server at registration), each refusal at the block it names with what
// to do instead; the files drover runs pass.
func TestRealWorldRegistration(t *testing.T) {
	tests := map[string][]string{
		"csi-node-plugin.hcl": nil,
		"nightly-backup.hcl":  nil,
		"render-dispatch.hcl": nil,
		"lone-task.hcl":       nil,
		"edge-gateways.hcl": {
			`edge-gateways.hcl:16:7: Invalid job; group "ingress": service "edge-ingress": connect: not supported: it needs Consul Connect`,
			`edge-gateways.hcl:47:7: Invalid job; group "terminating": service "edge-terminating": connect: not supported`,
		},
		"mesh-orders.hcl": {
			`mesh-orders.hcl:20:7: Invalid job; group "orders": service "orders": tagged_addresses: not supported: tagged addresses are Consul's`,
			`mesh-orders.hcl:24:7: Invalid job; group "orders": service "orders": connect: not supported: it needs Consul Connect, and drover has no Consul integration; use provider = "nomad" services`,
			`mesh-orders.hcl:76:7: Invalid job; group "orders": service "orders": check "service: \"orders\" check": expose: not supported`,
		},
		"multiregion-api.hcl": {
			`multiregion-api.hcl:6:3: Invalid job; multiregion: not supported: drover has no multi-region federation; remove the multiregion block`,
		},
		"payments-vault.hcl": {
			// The job's vault block reaches the task that has none.
			`payments-vault.hcl:6:3: Invalid job; group "worker": task "settle": vault: not supported: drover has no Vault integration; give the task its secrets`,
			// So does the group's, over the job's.
			`payments-vault.hcl:13:5: Invalid job; group "api": task "api": vault: not supported`,
			`payments-vault.hcl:37:7: Invalid job; group "api": task "migrate": vault: not supported`,
			`payments-vault.hcl:52:7: Invalid job; group "api": task "api": identity: not supported: remove the identity block`,
			`payments-vault.hcl:74:7: Invalid job; group "api": task "api": template 2: change_mode "script" is not supported`,
			`payments-vault.hcl:74:7: Invalid job; group "api": task "api": template 2: change_script: not supported: drover runs no template change scripts`,
		},
		"shop-web.hcl": {
			`shop-web.hcl:50:5: Invalid job; group "frontend": consul: not supported: drover has no Consul integration`,
			`shop-web.hcl:141:7: Invalid job; group "frontend": task "web": scaling "mem": not supported: it sizes the task's resources with Nomad Enterprise's dynamic application sizing`,
		},
	}
	files, _ := filepath.Glob("testdata/realworld/*.hcl")
	if len(files) != len(tests) {
		t.Fatalf("%d real-world files, %d expectations: add the new file's", len(files), len(tests))
	}
	for _, in := range files {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			want, ok := tests[name]
			if !ok {
				t.Fatal("no expectation for this file")
			}
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseWith(name, src, testOptions); err != nil {
				t.Fatalf("refused at parse time, want it parsed as Nomad parses it: %v", err)
			}
			_, err = Check(name, src, testOptions)
			if want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted, want a refusal")
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range want {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, w)
				}
				if !found {
					t.Errorf("no refusal starts %q:\n%s", w, err)
				}
			}
		})
	}
}

// TestLocatorAnnotate: a server's refusal of a parsed file (one message,
// or several as a ValidationError renders them) is placed at the blocks
// its messages name; a message naming none stays at the job.
func TestLocatorAnnotate(t *testing.T) {
	src, err := os.ReadFile("testdata/realworld/payments-vault.hcl")
	if err != nil {
		t.Fatal(err)
	}
	loc := NewLocator("payments-vault.hcl", src, testOptions)
	if loc == nil {
		t.Fatal("no locator for a file that parses")
	}
	tests := []struct{ in, want string }{
		{`group "api": task "migrate": vault: not supported`, `payments-vault.hcl:37:7: group "api": task "migrate": vault: not supported`},
		{`group "api": service "payments-api": provider: not set`, `payments-vault.hcl:24:7: group "api": service "payments-api": provider: not set`},
		{"2 errors occurred:\n\t* group \"worker\": task \"settle\": vault: x\n\t* something else",
			"2 errors occurred:\n\t* payments-vault.hcl:6:3: group \"worker\": task \"settle\": vault: x\n\t* payments-vault.hcl:3:1: something else"},
	}
	for _, tt := range tests {
		if got := loc.Annotate(tt.in); got != tt.want {
			t.Errorf("Annotate(%q) =\n%s\nwant\n%s", tt.in, got, tt.want)
		}
	}
	if NewLocator("x.hcl", []byte("job {"), Options{}) != nil {
		t.Error("a locator for a file that does not parse")
	}
	var none *Locator
	if got := none.Annotate("m"); got != "m" {
		t.Errorf("nil locator changed the text: %q", got)
	}
}

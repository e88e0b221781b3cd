package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/core/structs"
)

var update = flag.Bool("update", false, "rewrite the golden JSON files in testdata/")

// goldenInputs lists the job files whose parsed form is checked against a
// golden JSON file: testdata/*.hcl and the shipped examples.
func goldenInputs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	local, err := filepath.Glob("testdata/*.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range local {
		out[f] = strings.TrimSuffix(f, ".hcl") + ".json"
	}
	examples, err := filepath.Glob(filepath.Join(examplesDir, "*.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range examples {
		out[f] = filepath.Join("testdata", "example-"+strings.TrimSuffix(filepath.Base(f), ".hcl")+".json")
	}
	if len(out) < 8 {
		t.Fatalf("expected at least 8 golden inputs, found %d", len(out))
	}
	return out
}

const examplesDir = "../../examples/jobs"

func TestGolden(t *testing.T) {
	for in, golden := range goldenInputs(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			// A fixed filename keeps positions independent of the path.
			job, err := ParseWith(filepath.Base(in), src, testOptions)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false) // keep ">= 1.6" readable in review
			enc.SetIndent("", "  ")
			if err := enc.Encode(job); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden file (run go test -update to create it): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("parsed job differs from %s (run go test -update after checking the change)\ngot:\n%s", golden, got)
			}
		})
	}
}

// TestExamplesValidate guards the files the demo and the end-to-end tests
// submit: they must parse and pass the server's validation.
func TestExamplesValidate(t *testing.T) {
	tests := []struct {
		file, id, jobType string
		check             func(t *testing.T, j *structs.Job)
	}{
		{"sysbatch.hcl", "hello-sysbatch", structs.JobTypeSysBatch, func(t *testing.T, j *structs.Job) {
			task := j.TaskGroups[0].Tasks[0]
			if task.Resources.CPU != 50 || task.Resources.MemoryMB != 32 {
				t.Errorf("resources = %+v, want cpu 50 memory 32", task.Resources)
			}
			args := task.Config["args"].([]any)
			if !strings.Contains(args[1].(string), "$NOMAD_ALLOC_NAME on $(hostname)") {
				t.Errorf("args = %q", args)
			}
		}},
		{"system.hcl", "sleeper", structs.JobTypeSystem, func(t *testing.T, j *structs.Job) {
			task := j.TaskGroups[0].Tasks[0]
			if task.KillTimeout != 2*time.Second {
				t.Errorf("kill_timeout = %s, want 2s", task.KillTimeout)
			}
			if task.Config["command"] != "/bin/sleep" {
				t.Errorf("command = %v", task.Config["command"])
			}
		}},
		{"periodic.hcl", "tick", structs.JobTypeSysBatch, func(t *testing.T, j *structs.Job) {
			p := j.Periodic
			if p == nil || p.Spec != "*/1 * * * *" || !p.ProhibitOverlap || p.TimeZone != "UTC" || !p.Enabled || p.SpecType != "cron" {
				t.Errorf("periodic = %+v", p)
			}
			if !j.IsPeriodicActive() {
				t.Error("periodic job is not active")
			}
		}},
		{"dispatch.hcl", "greet", structs.JobTypeSysBatch, func(t *testing.T, j *structs.Job) {
			pj := j.ParameterizedJob
			if pj == nil || pj.Payload != "optional" || len(pj.MetaRequired) != 1 || pj.MetaRequired[0] != "name" {
				t.Errorf("parameterized = %+v", pj)
			}
			task := j.TaskGroups[0].Tasks[0]
			if task.DispatchPayload == nil || task.DispatchPayload.File != "input.txt" {
				t.Errorf("dispatch_payload = %+v", task.DispatchPayload)
			}
			args := task.Config["args"].([]any)
			if !strings.Contains(args[1].(string), "hello ${NOMAD_META_name}") || !strings.Contains(args[1].(string), "local/input.txt") {
				t.Errorf("args = %q", args)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(examplesDir, tt.file)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			j, err := ParseAndValidateWith(tt.file, src, testOptions)
			if err != nil {
				t.Fatalf("ParseAndValidate: %v", err)
			}
			if err := j.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if j.ID != tt.id || j.Name != tt.id || j.Type != tt.jobType {
				t.Errorf("job = %q/%q type %q, want %q type %q", j.ID, j.Name, j.Type, tt.id, tt.jobType)
			}
			if got := j.TaskGroups[0].Tasks[0].Driver; got != "raw_exec" {
				t.Errorf("driver = %q, want raw_exec", got)
			}
			tt.check(t, j)
		})
	}
}

func TestParseFile(t *testing.T) {
	j, err := ParseFile(filepath.Join(examplesDir, "system.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "sleeper" {
		t.Errorf("ID = %q", j.ID)
	}

	_, err = ParseFile(filepath.Join(t.TempDir(), "missing.hcl"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}

	bad := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(bad, []byte("job \"x\" {\n  typo = 1\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ParseFile(bad)
	if err == nil || !strings.HasPrefix(err.Error(), bad+":2:3: Unsupported argument") {
		t.Errorf("err = %v, want the file path and position", err)
	}
}

func TestParseAndValidateRefuses(t *testing.T) {
	src := `job "x" {
  type = "sysbatch"
  group "g" {
    reschedule {
      attempts = 1
    }
    task "t" {
      driver = "raw_exec"
    }
  }
}`
	// Parse alone accepts it: the reschedule block is kept for validation.
	j, err := ParseWith("x.hcl", []byte(src), testOptions)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if j.TaskGroups[0].ReschedulePolicy == nil {
		t.Fatal("reschedule block was dropped")
	}
	_, err = ParseAndValidateWith("x.hcl", []byte(src), testOptions)
	var ve *structs.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *structs.ValidationError", err)
	}
	if !strings.Contains(err.Error(), "sysbatch jobs should not have a reschedule policy") {
		t.Errorf("err = %v", err)
	}
	if Diagnostics(err) != nil {
		t.Error("a validation error carries no parse diagnostics")
	}
}

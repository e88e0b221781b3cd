package structs

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// boundsJob is a valid job with one of each block the walk goes through.
func boundsJob() *Job {
	return &Job{
		ID: "j", Type: "batch", Datacenters: []string{"dc1"},
		Meta:        map[string]string{"owner": "ops"},
		Constraints: []*Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}},
		Affinities:  []*Affinity{{LTarget: "${node.class}", Operand: "=", RTarget: "big", Weight: 50}},
		TaskGroups: []*TaskGroup{{
			Name: "g", Count: 1,
			RestartPolicy: &RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Second, Mode: "fail"},
			Services:      []*Service{{Name: "web", Provider: "nomad", Tags: []string{"a"}}},
			Tasks: []*Task{{
				Name: "t", Driver: "raw_exec",
				Config:    map[string]any{"command": "/bin/true", "args": []any{"-x"}},
				Env:       map[string]string{"PATH": "/bin"},
				Artifacts: []*TaskArtifact{{GetterSource: "https://example.com/a.tgz"}},
				Templates: []*Template{{EmbeddedTmpl: "x", DestPath: "local/a"}},
			}},
		}},
	}
}

// TestCheckBounds: every kind of field over its bound is refused by
// Validate with the field's path and the bound, the value itself is not
// echoed, and a job at its bounds passes.
func TestCheckBounds(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	many := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	task := func(j *Job) *Task { return j.TaskGroups[0].Tasks[0] }
	for _, tc := range []struct {
		name string
		mut  func(j *Job)
		want string // "" when valid
	}{
		{"at the bounds", func(j *Job) {
			j.ID = long(MaxIdentifierBytes)
			j.Meta = many(MaxEntries)
			j.Meta[long(MaxIdentifierBytes)] = long(MaxTextBytes)
			delete(j.Meta, "k0")
			task(j).Templates[0].EmbeddedTmpl = long(MaxTemplateBytes)
			task(j).Config["script"] = long(MaxBlobBytes)
		}, ""},
		{"Nomad's TestFS_Logs stdout_string", func(j *Job) {
			var b strings.Builder
			for i := range 80 << 10 { // 80 Ki lines of "%d\n", ~470 KB
				fmt.Fprintf(&b, "%d\n", i)
			}
			task(j).Config["stdout_string"] = b.String()
		}, ""},
		{"job ID of 1 MiB", func(j *Job) { j.ID = long(1 << 20) }, "Job.ID: 1048576 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"job name", func(j *Job) { j.Name = long(129) }, "Job.Name: 129 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"namespace", func(j *Job) { j.Namespace = long(200) }, "Job.Namespace: 200 bytes; exceeds limit MaxIdentifierBytes (128)"},
		{"datacenter", func(j *Job) { j.Datacenters = []string{"dc1", long(129)} }, "Job.Datacenters[1]: 129 bytes; exceeds limit MaxIdentifierBytes"},
		{"too many datacenters", func(j *Job) { j.Datacenters = make([]string, MaxEntries+1) }, "Job.Datacenters: 1025 entries; exceeds limit MaxEntries (1024)"},
		{"group name", func(j *Job) { j.TaskGroups[0].Name = long(129) }, "Job.TaskGroups[0].Name: 129 bytes; exceeds limit MaxIdentifierBytes"},
		{"task name", func(j *Job) { task(j).Name = long(129) }, "Job.TaskGroups[0].Tasks[0].Name: 129 bytes; exceeds limit MaxIdentifierBytes"},
		{"meta key", func(j *Job) { j.Meta[long(300)] = "v" },
			`Job.Meta["xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"…]: 300 bytes in the key; exceeds limit MaxIdentifierBytes (128)`},
		{"meta value", func(j *Job) { j.Meta["owner"] = long(MaxTextBytes + 1) }, `Job.Meta["owner"]: 8193 bytes; exceeds limit MaxTextBytes (8192)`},
		{"meta entries", func(j *Job) { j.Meta = many(MaxEntries + 1) }, "Job.Meta: 1025 entries; exceeds limit MaxEntries (1024)"},
		{"group meta", func(j *Job) { j.TaskGroups[0].Meta = map[string]string{"k": long(9000)} }, `Job.TaskGroups[0].Meta["k"]: 9000 bytes`},
		{"env value", func(j *Job) { task(j).Env["PATH"] = long(9000) }, `Job.TaskGroups[0].Tasks[0].Env["PATH"]: 9000 bytes; exceeds limit MaxTextBytes`},
		{"env key", func(j *Job) { task(j).Env[long(129)] = "v" }, `bytes in the key; exceeds limit MaxIdentifierBytes`},
		{"constraint operand", func(j *Job) { j.Constraints[0].RTarget = long(9000) }, "Job.Constraints[0].RTarget: 9000 bytes; exceeds limit MaxTextBytes"},
		{"affinity target", func(j *Job) { j.Affinities[0].LTarget = long(9000) }, "Job.Affinities[0].LTarget: 9000 bytes"},
		{"task constraint", func(j *Job) {
			task(j).Constraints = []*Constraint{{LTarget: long(9000), Operand: "=", RTarget: "x"}}
		}, "Job.TaskGroups[0].Tasks[0].Constraints[0].LTarget: 9000 bytes"},
		{"template data", func(j *Job) { task(j).Templates[0].EmbeddedTmpl = long(MaxTemplateBytes + 1) },
			"Job.TaskGroups[0].Tasks[0].Templates[0].EmbeddedTmpl: 262145 bytes; exceeds limit MaxTemplateBytes (262144)"},
		{"artifact source", func(j *Job) { task(j).Artifacts[0].GetterSource = "https://" + long(9000) },
			"Job.TaskGroups[0].Tasks[0].Artifacts[0].GetterSource: 9008 bytes; exceeds limit MaxTextBytes"},
		{"artifact options", func(j *Job) { task(j).Artifacts[0].GetterOptions = map[string]string{"checksum": long(9000)} },
			`Job.TaskGroups[0].Tasks[0].Artifacts[0].GetterOptions["checksum"]: 9000 bytes`},
		{"service name", func(j *Job) { j.TaskGroups[0].Services[0].Name = long(129) }, "Job.TaskGroups[0].Services[0].Name: 129 bytes; exceeds limit MaxIdentifierBytes"},
		{"service tag", func(j *Job) { j.TaskGroups[0].Services[0].Tags = []string{long(9000)} }, "Job.TaskGroups[0].Services[0].Tags[0]: 9000 bytes"},
		{"config string", func(j *Job) { task(j).Config["script"] = long(MaxBlobBytes + 1) },
			`Job.TaskGroups[0].Tasks[0].Config["script"]: 1048577 bytes; exceeds limit MaxBlobBytes (1048576)`},
		{"config list element", func(j *Job) { task(j).Config["args"] = []any{"a", long(MaxBlobBytes + 1)} },
			`Job.TaskGroups[0].Tasks[0].Config["args"][1]: 1048577 bytes; exceeds limit MaxBlobBytes`},
		{"config list entries", func(j *Job) { task(j).Config["args"] = make([]any, MaxCollectionElements+1) },
			`Job.TaskGroups[0].Tasks[0].Config["args"]: 10001 entries; exceeds limit MaxCollectionElements (10000)`},
		{"periodic time zone", func(j *Job) { j.Periodic = &PeriodicConfig{Spec: "@daily", TimeZone: long(200)} }, "Job.Periodic.TimeZone: 200 bytes; exceeds limit MaxIdentifierBytes"},
		{"parameterized meta keys", func(j *Job) { j.ParameterizedJob = &ParameterizedJobConfig{MetaRequired: []string{long(129)}} },
			"Job.ParameterizedJob.MetaRequired[0]: 129 bytes; exceeds limit MaxIdentifierBytes"},
		{"volume name", func(j *Job) {
			j.TaskGroups[0].Volumes = map[string]*VolumeRequest{long(129): {Name: long(129), Type: "host", Source: "s"}}
		}, "Job.TaskGroups[0].Volumes[\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"…]: 129 bytes in the key; exceeds limit MaxIdentifierBytes"},
		{"payload", func(j *Job) { j.Payload = make([]byte, MaxStoredPayloadBytes+1) }, "Job.Payload: 19147 bytes; exceeds limit MaxStoredPayloadBytes (19146)"},
		{"derived job ID", func(j *Job) { j.ParentID = "p"; j.ID = long(MaxChildJobIDBytes) }, ""},
		{"derived job ID too long", func(j *Job) { j.ParentID = "p"; j.ID = long(MaxChildJobIDBytes + 1) },
			"Job.ID: 257 bytes; exceeds limit MaxChildJobIDBytes (256)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := boundsJob()
			tc.mut(j)
			j.Canonicalize()
			err := j.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want a ValidationError containing %q", err, tc.want)
			}
			if len(err.Error()) > 2048 {
				t.Errorf("the error is %d bytes: it echoes the value", len(err.Error()))
			}
		})
	}
}

// TestCheckBoundsErrorList: many fields over their bounds give one sorted,
// capped list.
func TestCheckBoundsErrorList(t *testing.T) {
	j := boundsJob()
	for i := range 20 {
		j.Meta[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", MaxTextBytes+1)
	}
	err := j.CheckBounds()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("CheckBounds = %v", err)
	}
	if len(ve.Errors) != maxBoundErrors+1 || ve.Errors[maxBoundErrors] != "and 10 more fields over their bounds" {
		t.Fatalf("errors = %q", ve.Errors)
	}
	if !strings.HasPrefix(ve.Errors[0], `Job.Meta["k00"]`) || !strings.HasPrefix(ve.Errors[9], `Job.Meta["k09"]`) {
		t.Fatalf("errors not in order: %q", ve.Errors)
	}
}

// TestBoundsRequests: the other requests that store job-shaped input.
func TestBoundsRequests(t *testing.T) {
	long := strings.Repeat("x", MaxTextBytes+1)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"dispatch meta value", CheckBounds("Dispatch", &JobDispatchRequest{JobID: "p", Meta: map[string]string{"k": long}}), `Dispatch.Meta["k"]: 8193 bytes; exceeds limit MaxTextBytes`},
		{"dispatch token", CheckBounds("Dispatch", &JobDispatchRequest{JobID: "p", IdempotencyToken: long}), "Dispatch.IdempotencyToken: 8193 bytes; exceeds limit MaxIdentifierBytes"},
		{"dispatch prefix", CheckBounds("Dispatch", &JobDispatchRequest{JobID: "p", IdPrefixTemplate: strings.Repeat("x", 65)}), "Dispatch.IdPrefixTemplate: 65 bytes; exceeds limit MaxDispatchPrefixBytes (64)"},
		{"dispatch payload is dispatch's own rule", CheckBounds("Dispatch", &JobDispatchRequest{JobID: "p", Payload: make([]byte, 1<<20)}), ""},
		{"scaling target", (&ScalingRequest{Target: map[string]string{"Group": long}, Message: "m"}).Validate(), `ScalingRequest.Target["Group"]: 8193 bytes; exceeds limit MaxIdentifierBytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				if tc.err != nil {
					t.Fatal(tc.err)
				}
				return
			}
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) || HTTPStatus(tc.err) != 400 {
				t.Fatalf("err = %v (status %d), want a 400 containing %q", tc.err, HTTPStatus(tc.err), tc.want)
			}
		})
	}
}

// TestBoundTags parses the bound tag of every field of every type a job
// or a checked request reaches, so that a bad tag fails here rather than
// panic on a server.
func TestBoundTags(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var visit func(reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			if t.Kind() == reflect.Map {
				visit(t.Key())
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		fieldsOf(t) // panics on a bad tag
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("bound") != "-" {
				visit(f.Type)
			}
		}
	}
	for _, v := range []any{Job{}, JobDispatchRequest{}, ScalingRequest{}} {
		visit(reflect.TypeOf(v))
	}
	if len(seen) < 30 {
		t.Fatalf("visited %d types; the walk did not reach the job's blocks", len(seen))
	}
}

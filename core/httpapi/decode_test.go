package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/drover-org/drover/core/jobspec"
	"github.com/drover-org/drover/core/structs"
)

// nestedConfig returns a job body whose task config nests depth levels of
// arrays ("args": [[[…]]]).
func nestedConfig(depth int) string {
	return `{"Job":{"ID":"deep","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"args":` +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}}]}]}}`
}

func manyElements(n int) string {
	return `{"Job":{"ID":"wide","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Driver":"raw_exec","Config":{"args":[` +
		strings.TrimSuffix(strings.Repeat(`1,`, n), ",") + `]}}]}]}}`
}

// TestDecodeLimits: every refused body is a 400 (413 for size) naming the
// field or the limit, and nothing reaches the server.
func TestDecodeLimits(t *testing.T) {
	tests := []struct {
		name, method, target, body string
		code                       int
		want                       []string // substrings of the answer
	}{
		{name: "nesting as in the report", method: "PUT", target: "/v1/jobs", body: nestedConfig(1100), code: 400,
			want: []string{"MaxNestingDepth (64 levels)", "Job.TaskGroups[0].Tasks[0].Config.args[0]"}},
		{name: "nesting just past the limit", method: "PUT", target: "/v1/jobs", body: nestedConfig(structs.MaxNestingDepth - 6), code: 400,
			want: []string{"MaxNestingDepth"}},
		{name: "nesting within the limit", method: "PUT", target: "/v1/jobs", body: nestedConfig(structs.MaxNestingDepth - 7), code: 200},
		{name: "too many elements", method: "PUT", target: "/v1/jobs", body: manyElements(structs.MaxCollectionElements + 1), code: 400,
			want: []string{"MaxCollectionElements (10000)", "Job.TaskGroups[0].Tasks[0].Config.args"}},
		{name: "elements at the limit", method: "PUT", target: "/v1/jobs", body: manyElements(structs.MaxCollectionElements), code: 200},
		{name: "null group", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web","TaskGroups":[null]}}`, code: 400,
			want: []string{`"Job.TaskGroups[0]"`, "null"}},
		{name: "null task", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web","TaskGroups":[{"Name":"g","Tasks":[null]}]}}`, code: 400,
			want: []string{`"Job.TaskGroups[0].Tasks[0]"`, "null"}},
		{name: "null constraint", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web","Constraints":[null]}}`, code: 400,
			want: []string{`"Job.Constraints[0]"`, "null"}},
		{name: "null group constraint", method: "PUT", target: "/v1/job/web", body: `{"Job":{"ID":"web","TaskGroups":[{"Name":"g","Constraints":[{"Operand":"="},null]}]}}`, code: 400,
			want: []string{`"Job.TaskGroups[0].Constraints[1]"`}},
		{name: "null spread target", method: "PUT", target: "/v1/jobs", body: `{"Job":{"ID":"web","Spreads":[{"SpreadTarget":[null]}]}}`, code: 400,
			want: []string{`"Job.Spreads[0].SpreadTarget[0]"`}},
		{name: "null in a free-form config is kept", method: "PUT", target: "/v1/jobs",
			body: `{"Job":{"ID":"web","TaskGroups":[{"Name":"g","Tasks":[{"Name":"t","Config":{"args":[null],"x":null}}]}]}}`, code: 200},
		{name: "null job is the missing job", method: "PUT", target: "/v1/jobs", body: `{"Job":null}`, code: 400, want: []string{"Job must be specified"}},
		{name: "deep dispatch meta", method: "PUT", target: "/v1/job/p/dispatch", body: `{"Meta":` + strings.Repeat("[", 100) + `}`, code: 400,
			want: []string{"MaxNestingDepth"}},
		{name: "brackets inside strings do not count", method: "PUT", target: "/v1/jobs",
			body: `{"Job":{"ID":"web","Meta":{"k":"` + strings.Repeat(`[{\"`, 200) + `"}}}`, code: 200},
		{name: "deep HCL through the parse endpoint", method: "PUT", target: "/v1/jobs/parse",
			body: toJSONString(map[string]string{"JobHCL": "job \"j\" {\n  group \"g\" {\n    task \"t\" {\n      config {\n        args = " + strings.Repeat("[", 1100) + strings.Repeat("]", 1100) + "\n      }\n    }\n  }\n}\n"}),
			code: 400, want: []string{"job.hcl:5:", "Nesting too deep", "MaxNestingDepth"}},
		{name: "dispatch payload over 16 KiB", method: "PUT", target: "/v1/job/p/dispatch",
			body: `{"Payload":"` + base64.StdEncoding.EncodeToString(make([]byte, structs.DispatchPayloadSizeLimit+1)) + `"}`, code: 400,
			want: []string{"Payload exceeds maximum size", "16385 > 16384"}},
		{name: "dispatch payload at 16 KiB", method: "PUT", target: "/v1/job/p/dispatch",
			body: `{"Payload":"` + base64.StdEncoding.EncodeToString(make([]byte, structs.DispatchPayloadSizeLimit)) + `"}`, code: 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, fake := newTestAPI(t, Config{})
			rec := do(t, api.Handler(), tc.method, tc.target, tc.body)
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %.300s", rec.Code, tc.code, rec.Body.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.Body.String(), w) {
					t.Errorf("answer %.300q lacks %q", rec.Body.String(), w)
				}
			}
			if tc.code != 200 && fake.numCalls() != 0 {
				t.Errorf("refused request reached the server: %+v", fake.lastCall(t))
			}
		})
	}
}

// TestBodyLimit: a body over the configured cap is a 413 naming the limit,
// before the server sees it; the default cap applies when none is set.
func TestBodyLimit(t *testing.T) {
	// n bytes of meta, in values of 2 KiB at most (a meta value's bound is
	// MaxTextBytes).
	bigMeta := func(n int) string {
		var entries []string
		for i := 0; n > 0; i++ {
			c := min(n, 2048)
			entries = append(entries, fmt.Sprintf(`"k%d":"%s"`, i, strings.Repeat("x", c)))
			n -= c
		}
		return `{"Job":{"ID":"web","Meta":{` + strings.Join(entries, ",") + `}}}`
	}
	tests := []struct {
		name  string
		limit int64
		body  string
		code  int
	}{
		{"over a configured limit", 4096, bigMeta(4096), http.StatusRequestEntityTooLarge},
		{"under a configured limit", 4096, bigMeta(1024), http.StatusOK},
		{"over the default limit", 0, bigMeta(structs.DefaultMaxRequestBodyBytes), http.StatusRequestEntityTooLarge},
		{"under the default limit", 0, bigMeta(1 << 20), http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			api, fake := newTestAPI(t, Config{MaxBodyBytes: tc.limit})
			rec := do(t, api.Handler(), "PUT", "/v1/jobs", tc.body)
			if rec.Code != tc.code {
				t.Fatalf("status %d, want %d: %.300s", rec.Code, tc.code, rec.Body.String())
			}
			if tc.code == http.StatusOK {
				return
			}
			if !strings.Contains(rec.Body.String(), "http_max_body_bytes") {
				t.Errorf("answer %q does not name the limit", rec.Body.String())
			}
			if fake.numCalls() != 0 {
				t.Error("oversized request reached the server")
			}
		})
	}
}

// TestDeepestHCLJobFitsJSONLimits: the deepest task config a job file may
// hold is accepted when the parsed job is sent as JSON, as the CLI does.
func TestDeepestHCLJobFitsJSONLimits(t *testing.T) {
	depth := structs.MaxTaskConfigDepth - 1
	src := "job \"deep\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n      config {\n        args = " +
		strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n      }\n    }\n  }\n}\n"
	job, err := jobspec.Parse("job.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	api, _ := newTestAPI(t, Config{})
	rec := do(t, api.Handler(), "PUT", "/v1/jobs", toJSONString(map[string]any{"Job": job}))
	mustOK(t, rec)
}

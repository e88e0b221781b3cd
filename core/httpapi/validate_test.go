package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"
)

// TestValidateJob: /v1/validate/job answers Nomad's JobValidateResponse,
// with a refused job's reasons as a 200 and nothing written.
func TestValidateJob(t *testing.T) {
	w := newWorld(t, false)
	// What the jobs table holds, job by job, and each job's version: the
	// world's server may still write its own entries while the test runs
	// (its scheduler sets a job's status), but no validation may add or
	// change a job.
	jobsNow := func() map[string]uint64 {
		all, err := w.h.srv.State().Jobs(nil)
		if err != nil {
			t.Fatal(err)
		}
		m := make(map[string]uint64, len(all))
		for _, j := range all {
			m[j.Namespace+"/"+j.ID] = j.JobModifyIndex
		}
		return m
	}
	before := jobsNow()
	job := func(mut func(j map[string]any)) map[string]any {
		b := jobBody("default")
		mut(b["Job"].(map[string]any))
		return b
	}
	tests := []struct {
		name   string
		body   any
		code   int
		errors []string // substrings, one per expected ValidationErrors entry
	}{
		{name: "valid", body: jobBody("default"), code: 200},
		{name: "unserved type", body: job(func(j map[string]any) { j["Type"] = "gpu-batch" }), code: 200, errors: []string{`job type "gpu-batch" is not served`}},
		{name: "negative count", body: job(func(j map[string]any) {
			j["TaskGroups"].([]map[string]any)[0]["Count"] = -1
		}), code: 200, errors: []string{"count"}},
		{name: "missing namespace", body: jobBody("nowhere"), code: 200, errors: []string{"nowhere"}},
		{name: "no job", body: map[string]any{}, code: 400},
		// Nomad's TestJobs_Validate: a job without an ID is a 200 naming it.
		{name: "no job ID", body: job(func(j map[string]any) { delete(j, "ID") }), code: 200, errors: []string{"ID"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := w.do(callerMgmt, "PUT", "/v1/validate/job", tc.body)
			if status != tc.code {
				t.Fatalf("%d %s; want %d", status, body, tc.code)
			}
			if tc.code != 200 {
				return
			}
			var resp struct {
				DriverConfigValidated bool
				ValidationErrors      []string
				Error                 string
				Warnings              string
			}
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatalf("decode: %v: %s", err, body)
			}
			if len(resp.ValidationErrors) != len(tc.errors) {
				t.Fatalf("ValidationErrors %q; want %d like %q", resp.ValidationErrors, len(tc.errors), tc.errors)
			}
			for i, want := range tc.errors {
				if !strings.Contains(strings.ToLower(resp.ValidationErrors[i]), strings.ToLower(want)) {
					t.Errorf("ValidationErrors[%d] = %q; want it to mention %q", i, resp.ValidationErrors[i], want)
				}
			}
			if (len(tc.errors) == 0) != (resp.Error == "") {
				t.Errorf("Error %q with %d validation errors", resp.Error, len(tc.errors))
			}
		})
	}
	if after := jobsNow(); !maps.Equal(after, before) {
		t.Errorf("validation wrote jobs: %v -> %v", before, after)
	}

	// The official client decodes the answer.
	c := aclTestServer(t, false)
	j := nomadapi.NewBatchJob("v", "v", "global", 50)
	j.Datacenters = []string{"dc1"}
	j.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(nomadapi.NewTask("t", "raw_exec").SetConfig("command", "/bin/true")))
	resp, _, err := c.Jobs().Validate(j, nil)
	if err != nil || len(resp.ValidationErrors) != 0 || resp.Error != "" {
		t.Fatalf("client Validate: %+v, %v", resp, err)
	}
	bad := "nope"
	j.Type = &bad
	resp, _, err = c.Jobs().Validate(j, nil)
	if err != nil || !slices.ContainsFunc(resp.ValidationErrors, func(s string) bool { return strings.Contains(s, "nope") }) {
		t.Fatalf("client Validate of a bad type: %+v, %v", resp, err)
	}
	if status, _ := w.do(callerMgmt, http.MethodGet, "/v1/validate/job", nil); status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/validate/job: %d; want 405", status)
	}
}

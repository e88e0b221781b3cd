package httpapi

import (
	"net/http"
	"strings"
	"testing"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/drover-org/drover/core/structs"
)

// TestJobSubmission: the source Nomad's CLI sends with a register is kept
// with the version it wrote and read back by version; versions without
// one, oversized sources and purged jobs answer 404; bad input 400.
func TestJobSubmission(t *testing.T) {
	c := aclTestServer(t, false)
	newJob := func(cmd string) *nomadapi.Job {
		j := nomadapi.NewBatchJob("src", "src", "global", 50)
		j.Datacenters = []string{"dc1"}
		j.AddTaskGroup(nomadapi.NewTaskGroup("g", 1).AddTask(nomadapi.NewTask("t", "raw_exec").SetConfig("command", cmd)))
		return j
	}
	sub := &nomadapi.JobSubmission{Source: "job \"src\" {\n  # the original text\n}\n", Format: "hcl2",
		VariableFlags: map[string]string{"image": "busybox"}, Variables: "count = 2\n"}
	if _, _, err := c.Jobs().RegisterOpts(newJob("/bin/true"), &nomadapi.RegisterOptions{Submission: sub}, nil); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.Jobs().Submission("src", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != sub.Source || got.Format != "hcl2" || got.VariableFlags["image"] != "busybox" || got.Variables != sub.Variables {
		t.Fatalf("submission %+v; want %+v", got, sub)
	}

	// Version 1 without a source; version 0 keeps its own.
	if _, _, err := c.Jobs().Register(newJob("/bin/echo"), nil); err != nil {
		t.Fatal(err)
	}
	// Version 2 with a source over the limit: registered, source not kept.
	big := &nomadapi.JobSubmission{Source: strings.Repeat("#", structs.MaxJobSubmissionBytes+1), Format: "hcl2"}
	if _, _, err := c.Jobs().RegisterOpts(newJob("/bin/date"), &nomadapi.RegisterOptions{Submission: big}, nil); err != nil {
		t.Fatalf("register with an oversized source: %v", err)
	}
	tests := []struct {
		path string
		code int
		want string
	}{
		{path: "/v1/job/src/submission?version=0", code: 200, want: "the original text"},
		{path: "/v1/job/src/submission?version=1", code: 404, want: "job source not found"},
		{path: "/v1/job/src/submission?version=2", code: 404, want: "job source not found"},
		{path: "/v1/job/src/submission?version=9", code: 404, want: "job source not found"},
		{path: "/v1/job/src/submission", code: 400, want: "version: missing"},
		{path: "/v1/job/src/submission?version=-1", code: 400, want: "version:"},
		{path: "/v1/job/src/submission?version=0&namespace=*", code: 400, want: "one namespace"},
		{path: "/v1/job/nope/submission?version=0", code: 404},
	}
	for _, tc := range tests {
		resp, err := http.Get(c.Address() + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		b.Write(buf[:n])
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(b.String(), tc.want) {
			t.Errorf("GET %s: %d %.200q; want %d with %q", tc.path, resp.StatusCode, b.String(), tc.code, tc.want)
		}
	}

	// A malformed submission refuses the register.
	_, _, err = c.Jobs().RegisterOpts(newJob("/bin/true"), &nomadapi.RegisterOptions{Submission: &nomadapi.JobSubmission{Source: "x", Format: "yaml"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "Submission.Format") {
		t.Errorf("register with format yaml: %v; want a Submission.Format error", err)
	}

	// A purge drops the job's sources.
	if _, _, err := c.Jobs().Deregister("src", true, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Submission("src", 0, nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("submission of a purged job: %v; want 404", err)
	}
}

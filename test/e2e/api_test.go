package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The API's JSON, reduced to what the tests read. Declared here rather than
// imported from core/structs so that the tests pin the wire format (Nomad's
// PascalCase keys) a user's tooling depends on.
type (
	jobStub struct {
		ID, ParentID, Type, Status string
		Periodic, ParameterizedJob bool
		Stop                       bool
		ModifyIndex                uint64
	}
	job struct {
		ID, ParentID, Type, Status string
		Stop                       bool
		Meta                       map[string]string
		Payload                    []byte
	}
	taskState struct {
		State    string
		Failed   bool
		Restarts uint64
	}
	alloc struct {
		ID, EvalID, JobID, NodeID, TaskGroup string
		DesiredStatus, ClientStatus          string
		TaskStates                           map[string]*taskState
	}
	evaluation struct {
		ID, JobID, Status, StatusDescription, TriggeredBy string
	}
	nodeStub struct {
		ID, Name, Status, SchedulingEligibility string
		Drain                                   bool
		Drivers                                 map[string]struct{ Detected, Healthy bool }
	}
	node struct {
		ID, Status, SchedulingEligibility string
		DrainStrategy                     json.RawMessage
	}
	registerResponse struct {
		EvalID   string
		Warnings string
	}
)

// do sends one API request; in (when not nil) is sent as JSON and a 2xx body
// is decoded into out (when not nil). The status is returned whatever it is.
func (a *testAgent) do(method, path string, in, out any) (int, error) {
	status, body, err := a.raw(method, path, in)
	if err != nil || status/100 != 2 || out == nil {
		return status, err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return status, fmt.Errorf("decode %s %s: %w\n%s", method, path, err, body)
	}
	return status, nil
}

func (a *testAgent) raw(method, path string, in any) (int, []byte, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+a.Addr+path, body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// mustGet reads path into out and fails the test unless the answer is 200.
func (a *testAgent) mustGet(path string, out any) {
	a.t.Helper()
	if status, err := a.do(http.MethodGet, path, nil, out); err != nil || status != http.StatusOK {
		a.t.Fatalf("GET %s: status %d, %v", path, status, err)
	}
}

// mustWrite sends in with method and fails the test unless the answer is 2xx.
func (a *testAgent) mustWrite(method, path string, in, out any) {
	a.t.Helper()
	status, body, err := a.raw(method, path, in)
	if err != nil || status/100 != 2 {
		a.t.Fatalf("%s %s: status %d, %v: %s", method, path, status, err, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			a.t.Fatalf("%s %s: decode: %v\n%s", method, path, err, body)
		}
	}
}

// parseJob turns HCL into the API's job JSON through POST /v1/jobs/parse.
func (a *testAgent) parseJob(hcl string) json.RawMessage {
	a.t.Helper()
	var out json.RawMessage
	a.mustWrite(http.MethodPost, "/v1/jobs/parse", map[string]any{"JobHCL": hcl, "Canonicalize": true}, &out)
	return out
}

// allocsOf lists a job's allocations.
func (a *testAgent) allocsOf(jobID string) []alloc {
	a.t.Helper()
	var out []alloc
	a.mustGet("/v1/job/"+escape(jobID)+"/allocations", &out)
	return out
}

// escape escapes a job ID for a path: child IDs hold a slash.
func escape(id string) string { return strings.ReplaceAll(id, "/", "%2F") }

// cliResult is what one CLI run printed and returned.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout ---\n%s--- stderr ---\n%s", r.Code, r.Stdout, r.Stderr)
}

// cli runs `drover <args>` against the agent (DROVER_ADDR) and returns its
// output and exit code. Only a CLI that cannot run or hangs fails the test.
func (a *testAgent) cli(args ...string) cliResult {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = append(os.Environ(), "DROVER_ADDR=http://"+a.Addr)
	cmd.Dir = repoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := cliResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		a.t.Fatalf("drover %s: no exit within %s\n%s", strings.Join(args, " "), cliTimeout, res)
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		a.t.Fatalf("drover %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// mustCLI is cli for a run that must exit 0.
func (a *testAgent) mustCLI(args ...string) cliResult {
	a.t.Helper()
	res := a.cli(args...)
	if res.Code != 0 {
		a.t.Fatalf("drover %s: %s", strings.Join(args, " "), res)
	}
	return res
}

// waitFor polls cond until it holds or timeout passes; cond's message says
// what it saw last, for the failure.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(150 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last seen: %s", timeout, what, last)
		}
		<-tick.C
	}
}

// waitJobDead waits until the job is dead and has at least one allocation,
// every one of them complete, and returns the allocations.
func (a *testAgent) waitJobDead(jobID string) []alloc {
	a.t.Helper()
	var allocs []alloc
	waitFor(a.t, waitTimeout, "job "+jobID+" dead with complete allocs", func() (bool, string) {
		var j job
		if status, err := a.do(http.MethodGet, "/v1/job/"+escape(jobID), nil, &j); err != nil || status != http.StatusOK {
			return false, fmt.Sprintf("GET job: %d %v", status, err)
		}
		allocs = a.allocsOf(jobID)
		if j.Status != "dead" || len(allocs) == 0 {
			return false, fmt.Sprintf("status %s, %d allocs", j.Status, len(allocs))
		}
		for _, al := range allocs {
			if al.ClientStatus != "complete" {
				return false, fmt.Sprintf("alloc %s is %s", al.ID, al.ClientStatus)
			}
		}
		return true, ""
	})
	return allocs
}

// writeFile writes content to name in a fresh temp dir and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// exampleJob is the path of examples/jobs/<name>.
func exampleJob(name string) string { return filepath.Join(repoRoot, "examples", "jobs", name) }

// kvField reads `Key = value` from the CLI's key/value output.
func kvField(out, key string) (string, bool) {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s+= (.*)$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

var columnGap = regexp.MustCompile(`\s{2,}`)

// section returns the lines of the CLI output's section titled title (up to
// the next blank line), without the title.
func section(out, title string) []string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if l != title {
			continue
		}
		var body []string
		for _, l := range lines[i+1:] {
			if strings.TrimSpace(l) == "" {
				break
			}
			body = append(body, l)
		}
		return body
	}
	return nil
}

// table parses the CLI's column output (a header row, then rows; columns
// apart by two or more spaces) into one map per row.
func table(lines []string) []map[string]string {
	if len(lines) == 0 {
		return nil
	}
	header := columnGap.Split(strings.TrimSpace(lines[0]), -1)
	var rows []map[string]string
	for _, l := range lines[1:] {
		cells := columnGap.Split(strings.TrimSpace(l), -1)
		row := map[string]string{}
		for i, h := range header {
			if i < len(cells) {
				row[h] = cells[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// mustJSON fails the test unless s parses as JSON, and decodes it into out.
func mustJSON(t *testing.T, what, s string, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("%s: output is not JSON: %v\n%s", what, err, s)
	}
}
